// Package knemlmt is the knem backend of package lmt: a large message
// crosses with one copy made by the kernel module, the way MPICH's Nemesis
// "dma" LMT uses KNEM (Buntinas, Goglin, Goodell, Mercier, Moreaud,
// "Cache-Efficient, Intranode, Large-Message MPI Communication with
// MPICH2-Nemesis", ICPP 2009, §3.2-3.4).
//
// Importing the package registers the backend "knem" (wire id 6, a Pull
// flow):
//
//	import _ "github.com/knemesis/knemesis/kmod/knem/knemlmt"
//
// The sender declares its buffers as a read-only region and sends the
// 8-byte cookie in the RTS; nothing else of its address space travels.
// The receiver copies the whole message with one INLINE_COPY:
//
//   - synchronously, inside one Progress call, for messages shorter than
//     Policy.AsyncMin;
//   - asynchronously from AsyncMin on: the copy runs on the driver's kernel
//     thread (or on a DMA engine when Policy.DMA says so) and its status
//     slot is polled by later Progress calls, so small messages keep flowing
//     while megabytes move.
//
// When the driver has region attach and invalidation status
// (knem.FeatureAttach, knem.FeatureInvalidate), messages go through a
// registration cache: the sender keeps the region for the next message
// from the same buffer, or the same iovec list, while the driver says the
// buffers' pages are still the region's (regionCache), and the receiver
// maps such a region at its second message and copies later ones with
// memcpy from the mapping, without a system call (attachCache), for
// messages shorter than AsyncMin. A list whose buffers do not join page to
// page cannot be mapped: its region is still reused, and the receiver
// copies with the driver. Otherwise the region is single-use: consumed by
// the copy, or unpinned when the sender's Engine closes or its process
// exits.
//
// The backend is also the third rail of multirail-knem (lmt.KnemRail, an
// lmt.Offloader): the sender declares its message as above and offers the
// cookie in the multirail RTS, and the receiver has the module copy the
// piece the cut gave that rail, asynchronously, while it reads its own
// piece with process_vm_readv and the sender writes the last one (rail.go).
package knemlmt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/threshold"
	"github.com/knemesis/knemesis/topology"
)

// Name is the backend's name in lmt.Config.Prefer; its wire id and flow
// are in its lmt.Identity.
const Name = lmt.Knem

// handleLen is the RTS payload: cookie and message length.
const handleLen = 16

// Policy decides how the receiver copies each message.
type Policy struct {
	// AsyncMin is the size from which the copy runs asynchronously
	// (default 256 KiB). A copy shorter than this costs less than the
	// status-slot round trips; a longer one would hold up the progress
	// loop for its whole duration.
	AsyncMin int
	// DMA, when set, says whether a message of n bytes goes to the DMA
	// engine. Nil: threshold.DecideCopy, from this machine's DMA_min
	// and the copies this Engine has in flight. Used
	// only when the driver reports a DMA channel.
	DMA func(n int) bool
	// NoCache turns the registration cache off: every message gets a
	// single-use region and a driver copy, as with a driver without
	// attach (for comparisons; see the package documentation).
	NoCache bool
}

// DefaultAsyncMin is Policy.AsyncMin's default.
const DefaultAsyncMin = 256 << 10

var policy = Policy{AsyncMin: DefaultAsyncMin}

// SetPolicy changes the copy policy of Engines created afterwards. Call it
// before lmt.New, from one goroutine.
func SetPolicy(p Policy) {
	if p.AsyncMin <= 0 {
		p.AsyncMin = DefaultAsyncMin
	}
	policy = p
}

func init() {
	lmt.Register(Name, newBackend, check)
}

// backend is one Engine's knem context.
type backend struct {
	dev     *knem.Device // nil when the module is absent: Check says why
	status  *knem.StatusArray
	dma     bool
	policy  Policy
	openErr error
	// dmaMin and inflight feed threshold.DecideCopy when Policy.DMA is nil:
	// DMA_min falls as more copies share the cache (§4.4).
	dmaMin   int64
	inflight int
	// The registration cache, nil when off (Policy.NoCache, or a driver
	// without attach or invalidation status).
	regions *regionCache
	attach  *attachCache
	// piece is the receiver's buffers for a knem rail's piece, for the
	// length of its INLINE_COPY (rail.go); its storage is kept.
	piece [][]byte
}

func newBackend(env *lmt.Env) (lmt.Backend, error) {
	b := &backend{policy: policy}
	d, err := knem.Open()
	if err != nil {
		// Not an Engine error: the other backends still work.
		b.openErr = err
		return b, nil
	}
	// One slot per transfer in flight; a page holds 4096.
	s, err := d.MapStatus(4096)
	if err != nil {
		d.Close()
		b.openErr = err
		return b, nil
	}
	info, err := d.Info()
	if err != nil {
		s.Unmap()
		d.Close()
		b.openErr = err
		return b, nil
	}
	b.dev, b.status = d, s
	b.dma = info.Features&knem.FeatureDMA != 0
	cache := knem.FeatureAttach | knem.FeatureInvalidate
	if !b.policy.NoCache && info.Features&cache == cache {
		b.regions = &regionCache{dev: d, status: s}
		b.attach = &attachCache{dev: d}
	}
	if b.dma {
		b.dmaMin = machineDMAMin()
	}
	return b, nil
}

// machineDMAMin is the §3.5 threshold of the cache this process copies
// through, counting the cores that share it. Zero when the topology is
// unknown, which keeps every copy on the CPU: without DMA_min there is no
// evidence that offload pays.
func machineDMAMin() int64 { return threshold.MachineDMAMin(topology.DetectOptions{}) }

// useDMA decides whether an n-byte copy goes to the DMA engine.
func (b *backend) useDMA(n int) bool {
	if !b.dma {
		return false
	}
	if b.policy.DMA != nil {
		return b.policy.DMA(n)
	}
	mode := threshold.DecideCopy(threshold.Transfer{
		Size:       int64(n),
		DMAMin:     b.dmaMin,
		Concurrent: b.inflight + 1,
		Offload:    true,
		StatusSlot: true,
	})
	return mode != threshold.CPUCopy
}

// finish releases the status slot of a completed asynchronous copy.
func (b *backend) finish(t *lmt.Transfer, slot knem.Slot) {
	b.status.Free(slot)
	b.inflight--
	b.setState(t, cookieOf(t), 0)
}

func check(cfg *lmt.Config, peer lmt.Peer) error {
	d, err := knem.Open()
	if err != nil {
		return unavailable(err)
	}
	d.Close()
	return nil
}

func unavailable(err error) error {
	u := &lmt.Unavailable{Backend: Name, Peer: -1, Err: err, Reason: err.Error()}
	switch {
	case errors.Is(err, knem.ErrNoDevice):
		u.Reason = "no " + knem.DevicePath + ": the knem module is not loaded"
		u.Fix = "load it (modprobe knem, or insmod kmod/knem/module/knem.ko) and install kmod/knem/99-knem.rules"
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		u.Reason, u.Fix = "this process may not open "+knem.DevicePath, "install kmod/knem/99-knem.rules (mode 0666) or chmod the device"
		if n, c, serr := nodeAndCreds(); serr == nil {
			u.Reason, u.Fix = DeniedReason(n, c)
		}
	case errors.Is(err, knem.ErrABI):
		u.Fix = "unload the knem module loaded now (rmmod knem: another KNEM build), then load this tree's (make install puts it under DKMS; modprobe knem)"
	}
	return u
}

func (b *backend) Check(peer lmt.Peer) error {
	if b.dev == nil {
		return unavailable(b.openErr)
	}
	return nil
}

// A transfer's knem state lives in its Remote segments, so that no per
// message allocation or lookup is needed: segment 0 holds the cookie (the
// sender's own, or the one the receiver got) and, in Len, 1 when the
// sender's region is cached (persistent), segment 1 the receiver's status
// slot + 1 while an asynchronous copy is in flight.
func cookieOf(t *lmt.Transfer) knem.Cookie {
	if r := t.Remote(); len(r) > 0 {
		return knem.Cookie(r[0].Addr)
	}
	return 0
}

func cachedOf(t *lmt.Transfer) bool {
	r := t.Remote()
	return len(r) > 0 && r[0].Len == 1
}

func (b *backend) setState(t *lmt.Transfer, c knem.Cookie, slotPlus1 uint64) {
	b.setStateCached(t, c, cachedOf(t), slotPlus1)
}

func (b *backend) setStateCached(t *lmt.Transfer, c knem.Cookie, cached bool, slotPlus1 uint64) {
	var l uint64
	if cached {
		l = 1
	}
	t.SetRemote([]lmt.Segment{{Addr: uint64(c), Len: l}, {Addr: slotPlus1}})
}

func slotOf(t *lmt.Transfer) (knem.Slot, bool) {
	if r := t.Remote(); len(r) > 1 && r[1].Addr != 0 {
		return knem.Slot(r[1].Addr - 1), true
	}
	return 0, false
}

// cachedBit, in the handle's length field, says that the sender's region
// is cached (not single-use): the receiver may attach it.
const cachedBit = 1 << 63

// unpinnedBit, in the handle's length field with cookie 0, says that the
// sender could not pin the message: the driver charges pinned pages to
// the user, against RLIMIT_MEMLOCK, and all processes of a user share it
// (8 MiB by default on Debian, less than one large message of an 8-rank
// job). The receiver then settles on a backend that pins nothing (the
// lmt fallback of a refused handle: cma-write, or a stream backend), so
// the message still crosses, by another way.
const unpinnedBit = 1 << 62

// Handle declares the sender's buffers as a read region: a cached one when
// the cache is on and has room, else single-use.
func (b *backend) Handle(t *lmt.Transfer, dst []byte) (int, error) {
	if len(dst) < handleLen {
		return 0, fmt.Errorf("knemlmt: RTS room of %d bytes, need %d", len(dst), handleLen)
	}
	c, cached, err := b.declare(t)
	if errors.Is(err, unix.ENOMEM) {
		// Over the user's RLIMIT_MEMLOCK: the receiver falls back.
		b.setStateCached(t, 0, false, 0)
		putUnpinned(dst, t)
		return handleLen, nil
	}
	if err != nil {
		return 0, err
	}
	b.setStateCached(t, c, cached, 0)
	putHandle(dst, t, c, cached)
	return handleLen, nil
}

// putUnpinned writes the handle of a message the sender could not pin.
func putUnpinned(dst []byte, t *lmt.Transfer) {
	binary.LittleEndian.PutUint64(dst, 0)
	binary.LittleEndian.PutUint64(dst[8:], uint64(t.Len())|unpinnedBit)
}

// declare declares t's buffers as a read region: a cached one when the
// cache is on and has room, else single-use.
func (b *backend) declare(t *lmt.Transfer) (c knem.Cookie, cached bool, err error) {
	if t.Len() == 0 {
		return 0, false, nil
	}
	if b.regions != nil {
		if c, cached = b.regions.get(t, t.Buffers()); cached {
			return c, true, nil
		}
	}
	c, err = b.dev.CreateRegion(t.Buffers(), knem.ProtRead, knem.FlagSingleUse)
	if errors.Is(err, unix.ENOMEM) && b.regions != nil && b.regions.shrink() > 0 {
		// Over RLIMIT_MEMLOCK with idle cached regions pinned (the
		// cache gave up, every entry busy or no slot left).
		c, err = b.dev.CreateRegion(t.Buffers(), knem.ProtRead, knem.FlagSingleUse)
	}
	if err != nil {
		return 0, false, fmt.Errorf("knemlmt: declaring %d bytes for rank %d: %w", t.Len(), t.Peer(), err)
	}
	return c, false, nil
}

// putHandle writes the handle of t's region c into dst: the cookie, and
// the message length with cachedBit when the region is cached.
func putHandle(dst []byte, t *lmt.Transfer, c knem.Cookie, cached bool) {
	n := uint64(t.Len())
	if cached {
		n |= cachedBit
	}
	binary.LittleEndian.PutUint64(dst, uint64(c))
	binary.LittleEndian.PutUint64(dst[8:], n)
}

func (b *backend) SetPeerHandle(t *lmt.Transfer, h []byte) error {
	c, cached, err := decodeHandle(t.Peer(), h, t.MessageLen())
	if err != nil {
		return err
	}
	b.setStateCached(t, c, cached, 0)
	return nil
}

// decodeHandle reads the handle rank sent in the RTS of a message of
// msgLen bytes; what the peer wrote is checked, not trusted.
func decodeHandle(rank int, h []byte, msgLen int64) (c knem.Cookie, cached bool, err error) {
	if len(h) != handleLen {
		return 0, false, lmt.Corrupt(rank, "knem handle", "%d bytes, want %d", len(h), handleLen)
	}
	c = knem.Cookie(binary.LittleEndian.Uint64(h))
	raw := binary.LittleEndian.Uint64(h[8:])
	cached = raw&cachedBit != 0
	if raw&unpinnedBit != 0 && c == 0 && !cached {
		if n := int64(raw &^ unpinnedBit); n != msgLen {
			return 0, false, lmt.Corrupt(rank, "message length of a knem handle", "%d bytes, the RTS says %d", n, msgLen)
		}
		return 0, false, &lmt.Unavailable{
			Backend: Name, Peer: rank,
			Reason: fmt.Sprintf("rank %d could not pin its %d-byte message (over its user's RLIMIT_MEMLOCK, which all of the user's processes share)", rank, msgLen),
			Fix:    "raise RLIMIT_MEMLOCK (ulimit -l), or prefer a backend that pins nothing (cma, cma-write, shm) after knem",
			Err:    unix.ENOMEM,
		}
	}
	if n := int64(raw &^ cachedBit); n != msgLen {
		return 0, false, lmt.Corrupt(rank, "message length of a knem handle", "%d bytes, the RTS says %d", n, msgLen)
	}
	if c == 0 && msgLen != 0 {
		return 0, false, lmt.Corrupt(rank, "cookie of a knem handle", "0 for %d bytes", msgLen)
	}
	return c, cached, nil
}

func (b *backend) Start(t *lmt.Transfer) error { return nil }

// Step runs on the receiver: the first call copies (or starts the copy),
// later ones poll its slot. It reports the whole length at once, when the
// data is in place.
func (b *backend) Step(t *lmt.Transfer, max int) (int, error) {
	if slot, busy := slotOf(t); busy {
		done, err := b.copyStatus(t, slot)
		if !done {
			return 0, nil
		}
		b.finish(t, slot)
		if err != nil {
			return 0, err
		}
		return int(t.Len()), nil
	}
	n := int(t.Len())
	async := n >= b.policy.AsyncMin
	if !async && cachedOf(t) && b.attach != nil {
		if moved, ok := b.copyAttached(t, n); ok {
			return moved, nil
		}
	}
	slot, pending, err := b.startCopy(t, t.Buffers(), cookieOf(t), 0, n, async)
	switch {
	case err != nil:
		return 0, err
	case pending:
		b.setState(t, cookieOf(t), uint64(slot)+1)
		return 0, nil
	}
	return n, nil
}

// startCopy has the module copy the n bytes at off of region c into bufs,
// on its kernel thread or a DMA channel in a status slot when async and a
// slot is free (pending: the copy is left in flight there, counted in
// b.inflight), else before it returns.
func (b *backend) startCopy(t *lmt.Transfer, bufs [][]byte, c knem.Cookie, off int64, n int, async bool) (slot knem.Slot, pending bool, err error) {
	var flags knem.Flags
	if b.useDMA(n) {
		flags |= knem.FlagDMA
		if async {
			flags |= knem.FlagAsyncDMAComplete
		}
	} else if async {
		flags |= knem.FlagMemcpyThread
	}
	if async {
		var ok bool
		if slot, ok = b.status.Alloc(); !ok {
			async = false // 4096 copies in flight: copy this one now
			flags &^= knem.FlagMemcpyThread | knem.FlagAsyncDMAComplete
		}
	}
	st, err := b.dev.InlineCopy(knem.Read, bufs, c, uint64(off), uint64(n), flags, slot)
	t.CountSyscalls(1)
	if errors.Is(err, unix.ENOMEM) && flags != 0 {
		// An asynchronous or DMA copy pins this side too, charged to the
		// user's RLIMIT_MEMLOCK with the sender's region: over it, copy
		// now with the CPU, which pins nothing here.
		if async {
			b.status.Free(slot)
			async = false
		}
		st, err = b.dev.InlineCopy(knem.Read, bufs, c, uint64(off), uint64(n), 0, 0)
		t.CountSyscalls(1)
	}
	if st == knem.StatusPending && err == nil {
		b.inflight++
		return slot, true, nil
	}
	if async {
		b.status.Free(slot)
	}
	switch {
	case err != nil:
		if errors.Is(err, unix.EINVAL) {
			// The cookie is gone: the sender closed its Engine or died.
			if perr := t.CheckPeer(); perr != nil {
				return 0, false, perr
			}
		}
		return 0, false, fmt.Errorf("knemlmt: copy of %d bytes from rank %d: %w", n, t.Peer(), err)
	case st != knem.StatusSuccess:
		return 0, false, fmt.Errorf("knemlmt: copy of %d bytes from rank %d failed in the driver", n, t.Peer())
	}
	return 0, false, nil
}

// copyStatus reads the status slot of a copy startCopy left in flight:
// done once it is over, with its error. The caller frees the slot then.
func (b *backend) copyStatus(t *lmt.Transfer, slot knem.Slot) (done bool, err error) {
	st, err := b.status.Status(slot)
	switch {
	case err != nil:
		return true, fmt.Errorf("knemlmt: copy from rank %d: %w", t.Peer(), err)
	case st == knem.StatusPending:
		return false, nil
	case st != knem.StatusSuccess:
		return true, fmt.Errorf("knemlmt: copy from rank %d failed in the driver", t.Peer())
	}
	return true, nil
}

// copyAttached copies t's n bytes with memcpy from the attachment of its
// cached region; false: the region is not attached (yet), or the driver
// refused it, and the driver copies.
func (b *backend) copyAttached(t *lmt.Transfer, n int) (int, bool) {
	a, syscalls := b.attach.get(cookieOf(t))
	t.CountSyscalls(syscalls)
	if a == nil || len(a.Bytes()) < n {
		return 0, false
	}
	return t.Scatter(a.Bytes()[:n]), true
}

// Abort releases what a failed transfer holds. On the sender, a single-use
// region (already consumed if the receiver copied: then EINVAL, harmless);
// a cached one stays for the next message. On the
// receiver, an asynchronous copy still writes into the user's buffers: wait
// for it, so that the buffers are the user's again when the failure is
// reported.
func (b *backend) Abort(t *lmt.Transfer) {
	if b.dev == nil {
		return
	}
	if t.Side() == lmt.Sender {
		if c := cookieOf(t); c != 0 && !cachedOf(t) {
			_ = b.dev.DestroyRegion(c)
		}
		return
	}
	if slot, busy := slotOf(t); busy {
		b.status.Wait(slot, time.Minute)
		b.finish(t, slot)
	}
}

// Close releases the context: the driver destroys the regions left and
// waits for the copies in flight.
func (b *backend) Close() error {
	if b.dev == nil {
		return nil
	}
	var err error
	if b.attach != nil {
		err = b.attach.close()
	}
	if b.regions != nil {
		b.regions.close()
	}
	if cerr := b.dev.Close(); err == nil {
		err = cerr
	}
	if uerr := b.status.Unmap(); err == nil {
		err = uerr
	}
	b.dev = nil
	return err
}
