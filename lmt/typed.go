package lmt

import (
	"encoding/binary"
	"fmt"
	"math"

	"unsafe"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/internal/memcopy"
	"golang.org/x/sys/unix"
)

// Datatyped is implemented by backends that reach a transfer's buffers
// only through [Transfer.Iovecs], [Transfer.RemoteIovecs], Gather and
// Scatter, and name them to the peer with [EncodeSegments] and
// [DecodeSegments] (the CMA backends). They carry a message described by a
// datatype ([Engine.StartSendType], [Engine.StartRecvType]) without
// packing it whole: the iovec lists come block by block from the
// description, and the handle carries the description's compact encoding
// instead of one entry per block.
//
// Blocks shorter than [Config].SmallBlock are the exception, as in
// Aumage, Brunet, Furmento and Namyst, "NewMadeleine: a fast
// communication scheduling engine for high performance networks" (CAC
// 2007, §5.3), which aggregates the small blocks of a derived datatype
// and moves the large ones zero-copy to their final place: each side
// packs its small blocks, in stream order, into a staging buffer of its
// own (datatype.Stage), and the iovec lists name that buffer instead, a
// run of small blocks as one entry. An entry costs process_vm_readv a
// page lookup and pin, more than copying a block under a page
// (datatype.DefaultSmallBlock says why). The sender packs before its RTS
// leaves, its handle naming the staging buffer and its threshold; the
// receiver scatters once the message is all in; [Stats].Staged counts
// those bytes on each side. Large blocks are copied once, by the kernel,
// in place.
//
// The stream backends (shm, pipe, vmsplice) are Datatyped too: their
// handle names nothing, and each side's Step walks its own description
// into or out of the channel, so either side may be typed whatever the
// other is, and a description of any length, which no CTS would hold,
// needs no room anywhere. They cost a copy more than the others, which
// move the blocks in place: a typed send takes a stream backend only when
// none of the others can take it (its description too long for the RTS
// of a pull, CMA refused), and a typed receive falls back to one when the
// sender's backend cannot serve it and its own description is too long
// for the CTS of a push.
//
// A typed send never goes to another backend: a knem region or an arena
// slot is built from Buffers, which a typed transfer leaves empty. A
// typed receive may also take the messages of a [TypedReceiver].
type Datatyped interface {
	Datatypes() bool
}

// Walker is implemented by [Datatyped] backends that copy a transfer's
// bytes themselves, with Gather and Scatter, instead of naming its
// buffers to the kernel in iovec lists (the shm ring). A block costs them
// one memory copy however short it is, and no entry of a list, so their
// transfers stage no block: the ring's slots and the blocks exchange
// bytes directly, as MPICH's shm LMT unpacks a datatype segment straight
// out of its copy buffer, and [Stats].Staged stays 0.
type Walker interface {
	Walks() bool
}

// TypedReceiver is implemented by Pull backends whose handle names the
// sender's plain buffers while the receiver copies into its own through
// [Transfer.Iovecs] alone, with memory copies of its own (arena,
// arena-copy: the receiver copies out of the sender's region). A typed
// receive takes their messages, walking its blocks and staging none, as
// a [Walker]; a typed send does not use them. Without it a typed receive
// of an arena-copy message would fail: its sender, whose copy completed
// it for its user, cannot follow the receiver to another backend.
type TypedReceiver interface {
	ReceivesTyped() bool
}

// passes is how many times a choice of backend for t goes over the
// preference list: twice for a typed transfer (see takes), once for
// another.
func passes(t *Transfer) int {
	if t.needsDatatypes() {
		return 2
	}
	return 1
}

// takes reports whether s may carry t in pass p of a choice (see
// passes): any backend an untyped transfer; a typed one, first the
// Datatyped backends that move its blocks in place, one copy, then the
// stream ones, which copy them through their channel.
func (s *backendSlot) takes(t *Transfer, pass int) bool {
	if !t.needsDatatypes() {
		return true
	}
	return s.caps.has(capDatatypes) && (s.kind == Stream) == (pass == 1)
}

// typed is the state of a transfer whose buffer on one side or both is a
// base buffer and a datatype description, not an iovec list.
//
// Each side's blocks shorter than Config.SmallBlock live, for the copy
// mechanism, in a staging buffer of that side (datatype.Stage): the
// sender packs them into it before the RTS leaves, the handle names it
// beside the base buffer, the peer's iovec lists name it instead of each
// small block, and the receiver scatters it once all is in.
type typed struct {
	local   *datatype.Type // this side's description; nil: Transfer.iov
	base    []byte
	lcur    datatype.Cursor // at Transfer.moved
	lstage  datatype.Stage  // this side's small blocks
	staging []byte          // where lstage puts them, kept for reuse

	// The peer's description, decoded from its handle into storage the
	// pooled transfer keeps, so that decoding allocates nothing once its
	// arrays have grown.
	remote    datatype.Type
	hasRemote bool
	rbase     uintptr
	rstaging  uintptr // the peer's staging buffer
	rstage    datatype.Stage
	rcur      datatype.Cursor
}

// reset clears d for a pooled transfer's next message, keeping its
// storage: the arrays grown by earlier descriptions (lstage, remote,
// rstage) and the staging buffer.
func (d *typed) reset() {
	d.local, d.base, d.lcur, d.staging = nil, nil, datatype.Cursor{}, d.staging[:0]
	d.hasRemote, d.rbase, d.rstaging, d.rcur = false, 0, 0, datatype.Cursor{}
}

// StartSendType is StartSend for the message that typ describes over
// base: its bytes go from base's blocks to the receiver's buffers with no
// pack buffer, on a [Datatyped] backend (the CMA ones), but for its blocks
// shorter than Config.SmallBlock, which StartSendType packs into the
// transfer's staging buffer before it returns (see [Datatyped]). The RTS
// carries typ's compact encoding, so a vector of a million blocks needs a
// handle of a few dozen bytes. An indexed description takes 2 to 4 bytes
// a block in the handle: it must fit in rts. base belongs to the Engine
// until the transfer completes, and typ must not change meanwhile.
func (e *Engine) StartSendType(dst int, base []byte, typ *datatype.Type, backend string, rts []byte) (*Transfer, int, error) {
	if err := typ.Fits(base); err != nil {
		return nil, 0, fmt.Errorf("lmt: send datatype: %w", err)
	}
	return e.startSend(dst, nil, &typed{local: typ, base: base}, backend, rts)
}

// StartRecvType is StartRecv into the blocks that typ describes over base:
// its blocks shorter than Config.SmallBlock receive through the
// transfer's staging buffer, scattered into them as the transfer
// completes (see [Datatyped]), the others directly. A message longer than
// typ.Size() is truncated as StartRecv truncates, with a
// [*TruncationError]; a shorter one fills the first blocks. Nothing past
// the message's bytes' blocks is written.
func (e *Engine) StartRecvType(src int, rts []byte, base []byte, typ *datatype.Type) (*Transfer, error) {
	if err := typ.Fits(base); err != nil {
		return nil, fmt.Errorf("lmt: receive datatype: %w", err)
	}
	return e.startRecv(src, rts, nil, &typed{local: typ, base: base})
}

// setTyped makes t's buffer the description in d. Which of its blocks
// are staged waits for its backend (stage).
func (t *Transfer) setTyped(d *typed) {
	t.dt.local, t.dt.base = d.local, d.base
	t.dt.lcur = d.local.Cursor()
	t.dt.lstage.Reset(nil, 0)
	t.dt.staging = t.dt.staging[:0]
}

// stage decides, when t goes on backend s, which of this side's blocks
// go through its staging buffer: those shorter than Config.SmallBlock,
// or none on a [Walker] or a backend that takes no description. A sender
// packs them at once, before its RTS names the buffer to a receiver that
// may read it at once, or before its first Step on the backend its
// receiver answered with.
func (t *Transfer) stage(s *backendSlot) {
	threshold := int64(t.e.cfg.SmallBlock)
	if !s.caps.has(capStages) {
		threshold = 0
	}
	t.dt.lstage.Reset(t.dt.local, threshold)
	n := int(t.dt.lstage.Bytes())
	if cap(t.dt.staging) < n {
		t.dt.staging = make([]byte, n)
	}
	t.dt.staging = t.dt.staging[:n]
	t.stats.Staged = 0
	if t.side == Sender && n > 0 {
		t.stats.Staged, _ = t.dt.lstage.Pack(t.dt.staging, t.dt.base) // Fits was checked
	}
}

// unstage scatters a receiver's staging buffer into its small blocks once
// the message's bytes are all in, and counts them in Stats.Staged.
func (t *Transfer) unstage() {
	if t.side != Receiver || t.dt.local == nil || t.dt.lstage.Bytes() == 0 {
		return
	}
	t.stats.Staged, _ = t.dt.lstage.Unpack(t.dt.base, t.dt.staging, t.length)
}

// Typed reports whether this side's buffer is a datatype description.
func (t *Transfer) Typed() bool { return t.dt.local != nil }

// bufLen is the number of bytes this side's buffers hold.
func (t *Transfer) bufLen() int64 {
	if t.dt.local != nil {
		return t.dt.local.Size()
	}
	return iovLen(t.iov)
}

// needsDatatypes reports whether t may only go to a [Datatyped] backend:
// either side's buffer is a description.
func (t *Transfer) needsDatatypes() bool { return t.dt.local != nil || t.dt.hasRemote }

// typedIovecs is Iovecs over this side's description.
func (t *Transfer) typedIovecs(dst []unix.Iovec, max int64) ([]unix.Iovec, int) {
	c := t.dt.lcur
	k, n, _ := c.FillStagedIovec(&t.dt.lstage, t.dt.base, t.dt.staging, dst, max) // Fits was checked at the start
	return dst[:k], int(n)
}

// typedRemoteIovecs is RemoteIovecs over the peer's description.
func (t *Transfer) typedRemoteIovecs(dst []unix.RemoteIovec, max int64) ([]unix.RemoteIovec, int) {
	c := t.dt.rcur
	k, n, _ := c.FillStagedRemoteIovec(&t.dt.rstage, t.dt.rbase, t.dt.rstaging, dst, max) // decodeTyped checked both extents
	return dst[:k], int(n)
}

// typedWalk is walk over this side's description: it packs from or
// unpacks into the blocks from byte pos of the stream, the small ones in
// the staging buffer, which holds them for the copy mechanism.
func (t *Transfer) typedWalk(p []byte, pos int64, out bool) int {
	c := t.dt.lcur
	if c.SetPos(pos) != nil {
		return 0
	}
	if t.dt.lstage.Bytes() == 0 {
		return walkBlocks(&c, t.dt.base, p, out)
	}
	done := 0
	for done < len(p) {
		staged, off, n := c.NextStaged(&t.dt.lstage, int64(len(p)-done))
		if n == 0 {
			break
		}
		buf := t.dt.base
		if staged {
			buf = t.dt.staging
		}
		if out {
			done += memcopy.Copy(p[done:done+int(n)], buf[off:off+n])
		} else {
			done += memcopy.Copy(buf[off:off+n], p[done:done+int(n)])
		}
	}
	return done
}

// walkBlocks is typedWalk when nothing is staged (a [Walker]'s transfer,
// the shm ring's): block by block, without asking the stage of each.
func walkBlocks(c *datatype.Cursor, base, p []byte, out bool) int {
	done := 0
	for done < len(p) {
		off, n := c.Next(int64(len(p) - done))
		if n == 0 {
			break
		}
		if out {
			done += memcopy.Copy(p[done:done+int(n)], base[off:off+n])
		} else {
			done += memcopy.Copy(base[off:off+n], p[done:done+int(n)])
		}
	}
	return done
}

// moveTyped puts the description cursors at t.moved.
func (t *Transfer) moveTyped() {
	if t.dt.local != nil {
		_ = t.dt.lcur.SetPos(t.moved) // moved ≤ length ≤ Size
	}
	if t.dt.hasRemote {
		_ = t.dt.rcur.SetPos(t.moved) // decodeTyped checked length ≤ Size
	}
}

// Typed handles: the segment handle's header (pid, count, PID namespace)
// with the count typeHandle, which no segment count reaches (MaxSegments
// is at most IOV_MAX), then the base address of the description in the
// peer, the address of its staging buffer and the threshold below which
// its blocks are staged there, and its encoding (package datatype) to the
// end of the handle. The threshold travels so that the peer classifies
// the blocks as their owner did, whatever its own Config.SmallBlock.
const (
	typeHandle    = math.MaxUint32
	typeHandleLen = 40 // header, base and staging addresses, threshold
)

// typedHandleLen is the length of the handle naming t's description.
func typedHandleLen(t *Transfer) int { return typeHandleLen + t.dt.local.EncodedLen() }

func encodeTyped(t *Transfer, pid int, pidns uint64, dst []byte) (int, error) {
	need := typedHandleLen(t)
	if need > len(dst) {
		return 0, fmt.Errorf("lmt: a %d-block description needs a %d-byte handle, room for %d", t.dt.local.Blocks(), need, len(dst))
	}
	putSegHeader(dst, pid, typeHandle, pidns)
	le := binary.LittleEndian
	le.PutUint64(dst[16:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(t.dt.base)))))
	le.PutUint64(dst[24:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(t.dt.staging)))))
	le.PutUint64(dst[32:], uint64(t.dt.lstage.Threshold()))
	t.dt.local.AppendEncode(dst[typeHandleLen:typeHandleLen])
	return need, nil
}

// decodeTyped reads the description of a typed handle h from the peer,
// whose header is already checked, into t. Nothing in it is trusted: the
// encoding must decode (package datatype bounds every field), the blocks
// must lie within the address space from the base, the staging buffer
// within it from its address, the threshold must not be negative, and the
// description must hold the bytes the transfer moves. On error t has no
// remote description and nothing was written anywhere.
func decodeTyped(t *Transfer, h []byte) error {
	t.dt.hasRemote = false
	if len(h) < typeHandleLen {
		return Corrupt(t.peer, "typed handle", "%d bytes, shorter than its %d-byte header", len(h), typeHandleLen)
	}
	le := binary.LittleEndian
	base, staging, threshold := le.Uint64(h[16:]), le.Uint64(h[24:]), int64(le.Uint64(h[32:]))
	if threshold < 0 {
		return Corrupt(t.peer, "small-block threshold of a typed handle", "%d, negative", threshold)
	}
	if err := datatype.DecodeTo(&t.dt.remote, h[typeHandleLen:], int64(min(math.MaxInt64, math.MaxUint64-base))); err != nil {
		return fmt.Errorf("%w: %w", Corrupt(t.peer, "datatype of a typed handle", "%v", err), err)
	}
	if size := t.dt.remote.Size(); size < t.length {
		return Corrupt(t.peer, "datatype of a typed handle", "its blocks hold %d bytes, shorter than the %d to move", size, t.length)
	}
	t.dt.rstage.Reset(&t.dt.remote, threshold)
	if n := uint64(t.dt.rstage.Bytes()); n > math.MaxUint64-staging {
		return Corrupt(t.peer, "staging address of a typed handle", "%d bytes at %#x wrap around the address space", n, staging)
	}
	t.dt.hasRemote, t.dt.rbase, t.dt.rstaging = true, uintptr(base), uintptr(staging)
	t.dt.rcur = t.dt.remote.Cursor()
	return nil
}
