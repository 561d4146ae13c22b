// Package arena registers the LMT backend "arena": the receiver copies a
// message straight out of its sender's buffer, which lies in the job's
// shared arena (nemesis.Endpoint.Alloc), with one user-space copy and no
// system call: what lmtbench's memcpy reference does, and what CMA and
// KNEM do minus the system call, the pinning of the sender's pages and
// the page-table walk.
//
// It runs the Pull flow of package lmt: the RTS names the sender's
// buffers as offsets into the sender's region of the arena; the receiver
// checks every offset against that region's bounds (a broken peer gets an
// lmt.CorruptError naming the field, never a read outside the arena),
// copies, and sends DONE, which completes the send.
//
// The arena is part of the job's segment, which every rank maps until it
// closes: a receiver reading the region of a rank that died reads memory
// that stays mapped, with no SIGBUS, and its transfer ends as the
// endpoint's liveness watch decides (the copied bytes, or a PeerError).
//
// Most messages from the arena never reach it: the endpoint sends them as
// a descriptor and its receiver copies them itself, with no rendezvous
// (nemesis, arenasend.go). attach hands them to the LMT, and picks this
// backend for them, when Options.Prefer names it (as `lmtbench --backends
// arena` does, to compare both); it is in no default preference, and a
// message forced onto it from other memory fails its send with an error
// saying so.
//
// The package registers a second backend, "arena-copy" (copy.go), for
// medium messages from ordinary memory: the sender copies the message into
// a slot of its own region and completes at once, as an eager send does;
// the receiver copies it out as above. Two user copies, one RTS, no system
// call and no wait for the DONE. It serves a job that has an arena, for
// messages up to SlotSize, when forced or named by a selector.
package arena

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"github.com/knemesis/knemesis/internal/memcopy"
	"github.com/knemesis/knemesis/lmt"
	"golang.org/x/sys/unix"
)

// chunk bounds one Step: a user-space copy has no per-call cost to
// amortise, so a Step is as large as responsiveness allows (a megabyte
// copies in tens of microseconds), and a medium message moves in one.
const chunk = 1 << 20

// iovMax bounds the pieces one Step walks; a handle carries at most
// lmt.Config.MaxSegments of them anyway.
const iovMax = 256

func init() {
	lmt.Register(lmt.Arena, func(env *lmt.Env) (lmt.Backend, error) { return newArena(env), nil }, probe)
}

type backend struct {
	env    *lmt.Env
	pid    int
	local  [iovMax]unix.Iovec
	remote [iovMax]unix.RemoteIovec
}

func newArena(env *lmt.Env) *backend { return &backend{env: env, pid: os.Getpid()} }

// Chunk implements lmt.Chunker.
func (b *backend) Chunk() int { return chunk }

func probe(cfg *lmt.Config, peer lmt.Peer) error { return check(cfg, peer.Rank) }

func check(cfg *lmt.Config, peer int) error {
	if cfg.Arena == nil || cfg.Arena(cfg.Rank) == nil || peer >= 0 && cfg.Arena(peer) == nil {
		return &lmt.Unavailable{Backend: lmt.Arena, Peer: -1,
			Reason: "the job has no shared arena",
			Fix:    "Join with nemesis.Options.ArenaSize and send from buffers of Endpoint.Alloc"}
	}
	return nil
}

func (b *backend) Check(peer lmt.Peer) error { return check(b.env.Config, peer.Rank) }

// Handle names t's buffers by their offsets in this rank's region, in the
// segment handle format of package lmt (the pid is ours; the addresses are
// offsets).
func (b *backend) Handle(t *lmt.Transfer, dst []byte) (int, error) {
	own := b.env.Config.Arena(b.env.Rank)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(own)))
	for i, buf := range t.Buffers() {
		if len(buf) == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
		if p < base || p+uintptr(len(buf)) > base+uintptr(len(own)) {
			return 0, fmt.Errorf("lmt: arena: buffer %d (%d bytes at %#x) is not in this rank's shared arena: allocate it with Endpoint.Alloc", i, len(buf), p)
		}
	}
	n, err := lmt.EncodeSegments(t, b.pid, 0, dst)
	if err != nil {
		return 0, err
	}
	toOffsets(dst[:n], uint64(base))
	return n, nil
}

// SetPeerHandle reads the sender's offsets and checks each against its
// region as mapped here.
func (b *backend) SetPeerHandle(t *lmt.Transfer, h []byte) error {
	pid, _, err := lmt.DecodeSegments(t, h)
	if err != nil {
		return err
	}
	if known := b.env.PeerPID(t.Peer()); known != 0 && pid != known {
		return lmt.Corrupt(t.Peer(), "arena handle's pid", "%d, but rank %d is process %d", pid, t.Peer(), known)
	}
	size := uint64(len(b.env.Config.Arena(t.Peer())))
	for i, s := range t.Remote() {
		if s.Addr > size || s.Len > size-s.Addr {
			return lmt.Corrupt(t.Peer(), fmt.Sprintf("segment %d of an arena handle", i), "%d bytes at offset %d, outside the rank's %d-byte region", s.Len, s.Addr, size)
		}
	}
	return nil
}

func (b *backend) Start(t *lmt.Transfer) error { return nil }

// Step copies up to max bytes from the sender's region into the receive
// buffers, piece by piece.
func (b *backend) Step(t *lmt.Transfer, max int) (int, error) {
	region := b.env.Config.Arena(t.Peer())
	local, n := t.Iovecs(b.local[:], max)
	remote, _ := t.RemoteIovecs(b.remote[:], n)
	moved, li, loff := 0, 0, 0
	for _, r := range remote {
		src := region[r.Base : r.Base+uintptr(r.Len)]
		for len(src) > 0 && li < len(local) {
			dst := unsafe.Slice(local[li].Base, local[li].Len)[loff:]
			k := memcopy.Copy(dst, src)
			moved, src, loff = moved+k, src[k:], loff+k
			if k == len(dst) {
				li, loff = li+1, 0
			}
		}
	}
	return moved, nil
}

// ReceivesTyped implements [lmt.TypedReceiver] (for arena-copy too): the
// receiver's Step reaches its buffers only through t.Iovecs, which walks
// a receive description block by block, while the handle names the
// sender's plain buffers.
func (b *backend) ReceivesTyped() bool { return true }

func (b *backend) Abort(t *lmt.Transfer) {}
func (b *backend) Close() error          { return nil }

// toOffsets rewrites the addresses of a segment handle (16-byte header,
// then address and length pairs) as offsets from base.
func toOffsets(h []byte, base uint64) {
	le := binary.LittleEndian
	for p := h[16:]; len(p) >= 16; p = p[16:] {
		le.PutUint64(p, le.Uint64(p)-base)
	}
}
