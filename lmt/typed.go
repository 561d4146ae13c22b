package lmt

import (
	"encoding/binary"
	"fmt"
	"math"

	"unsafe"

	"github.com/knemesis/knemesis/datatype"
	"golang.org/x/sys/unix"
)

// Datatyped is implemented by backends that reach a transfer's buffers
// only through [Transfer.Iovecs], [Transfer.RemoteIovecs], Gather and
// Scatter, and name them to the peer with [EncodeSegments] and
// [DecodeSegments] (the CMA backends). They carry a message described by a
// datatype ([Engine.StartSendType], [Engine.StartRecvType]) without
// packing it: the iovec lists come block by block from the description,
// and the handle carries the description's compact encoding instead of
// one entry per block. A typed transfer never goes to another backend:
// a knem region or an arena slot is built from Buffers, which a typed
// transfer leaves empty.
type Datatyped interface {
	Datatypes() bool
}

// typed is the state of a transfer whose buffer on one side or both is a
// base buffer and a datatype description, not an iovec list.
type typed struct {
	local *datatype.Type // this side's description; nil: Transfer.iov
	base  []byte
	lcur  datatype.Cursor // at Transfer.moved

	// The peer's description, decoded from its handle into storage the
	// pooled transfer keeps, so that decoding allocates nothing once its
	// arrays have grown.
	remote    datatype.Type
	hasRemote bool
	rbase     uintptr
	rcur      datatype.Cursor
}

// StartSendType is StartSend for the message that typ describes over
// base: its bytes go from base's blocks to the receiver's buffers with no
// pack buffer, on a [Datatyped] backend (the CMA ones); the RTS carries
// typ's compact encoding, so a vector of a million blocks needs a handle
// of a few dozen bytes. An indexed description takes 2 to 4 bytes a block
// in the handle: it must fit in rts. base belongs to the Engine until the
// transfer completes, and typ must not change meanwhile.
func (e *Engine) StartSendType(dst int, base []byte, typ *datatype.Type, backend string, rts []byte) (*Transfer, int, error) {
	if err := typ.Fits(base); err != nil {
		return nil, 0, fmt.Errorf("lmt: send datatype: %w", err)
	}
	return e.startSend(dst, nil, &typed{local: typ, base: base}, backend, rts)
}

// StartRecvType is StartRecv into the blocks that typ describes over base.
// A message longer than typ.Size() is truncated as StartRecv truncates,
// with a [*TruncationError]: nothing past the first Size bytes' blocks is
// written.
func (e *Engine) StartRecvType(src int, rts []byte, base []byte, typ *datatype.Type) (*Transfer, error) {
	if err := typ.Fits(base); err != nil {
		return nil, fmt.Errorf("lmt: receive datatype: %w", err)
	}
	return e.startRecv(src, rts, nil, &typed{local: typ, base: base})
}

// setTyped makes t's buffer the description in d.
func (t *Transfer) setTyped(d *typed) {
	t.dt.local, t.dt.base = d.local, d.base
	t.dt.lcur = d.local.Cursor()
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
	k, n, _ := c.FillIovec(t.dt.base, dst, max) // Fits was checked at the start
	return dst[:k], int(n)
}

// typedRemoteIovecs is RemoteIovecs over the peer's description.
func (t *Transfer) typedRemoteIovecs(dst []unix.RemoteIovec, max int64) ([]unix.RemoteIovec, int) {
	c := t.dt.rcur
	k, n, _ := c.FillRemoteIovec(t.dt.rbase, dst, max) // the extent was checked by decodeTyped
	return dst[:k], int(n)
}

// typedWalk is walk over this side's description: it packs from or
// unpacks into the blocks from byte pos of the stream.
func (t *Transfer) typedWalk(p []byte, pos int64, out bool) int {
	c := t.dt.lcur
	if c.SetPos(pos) != nil {
		return 0
	}
	var n int
	if out {
		n, _ = c.Pack(p, t.dt.base)
	} else {
		n, _ = c.Unpack(t.dt.base, p)
	}
	return n
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
// peer and its encoding (package datatype) to the end of the handle.
const (
	typeHandle    = math.MaxUint32
	typeHandleLen = 24 // header and base address
)

// typedHandleLen is the length of the handle naming t's description.
func typedHandleLen(t *Transfer) int { return typeHandleLen + t.dt.local.EncodedLen() }

func encodeTyped(t *Transfer, pid int, pidns uint64, dst []byte) (int, error) {
	need := typedHandleLen(t)
	if need > len(dst) {
		return 0, fmt.Errorf("lmt: a %d-block description needs a %d-byte handle, room for %d", t.dt.local.Blocks(), need, len(dst))
	}
	putSegHeader(dst, pid, typeHandle, pidns)
	binary.LittleEndian.PutUint64(dst[16:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(t.dt.base)))))
	t.dt.local.AppendEncode(dst[typeHandleLen:typeHandleLen])
	return need, nil
}

// decodeTyped reads the description of a typed handle h from the peer,
// whose header is already checked, into t. Nothing in it is trusted: the
// encoding must decode (package datatype bounds every field), the blocks
// must lie within the address space from the base, and the description
// must hold the bytes the transfer moves. On error t has no remote
// description and nothing was written anywhere.
func decodeTyped(t *Transfer, h []byte) error {
	t.dt.hasRemote = false
	if len(h) < typeHandleLen {
		return Corrupt(t.peer, "typed handle", "%d bytes, shorter than its %d-byte header", len(h), typeHandleLen)
	}
	base := binary.LittleEndian.Uint64(h[16:])
	if err := datatype.DecodeTo(&t.dt.remote, h[typeHandleLen:], int64(min(math.MaxInt64, math.MaxUint64-base))); err != nil {
		return fmt.Errorf("%w: %w", Corrupt(t.peer, "datatype of a typed handle", "%v", err), err)
	}
	if size := t.dt.remote.Size(); size < t.length {
		return Corrupt(t.peer, "datatype of a typed handle", "its blocks hold %d bytes, shorter than the %d to move", size, t.length)
	}
	t.dt.hasRemote, t.dt.rbase = true, uintptr(base)
	t.dt.rcur = t.dt.remote.Cursor()
	return nil
}
