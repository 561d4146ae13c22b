package rma

import (
	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/nemesis"
)

type opKind uint8

const (
	opPut opKind = iota + 1
	opGet
	opAtomic
)

type opState uint8

const (
	opIdle opState = iota
	opPending
	opDone
)

// Op is one operation on a window: a put, a get or an atomic. The caller
// owns it (var op rma.Op), so starting an operation allocates nothing; it
// may be reused once the operation has completed (Test or Wait said so).
// Its buffers must not be touched until then.
type Op struct {
	w      *Window
	kind   opKind
	state  opState
	target int
	off    int // in the target's part of the window
	n      int // bytes
	iov    [][]byte
	one    [1][]byte // iov of the single-buffer calls
	moved  int       // bytes copied, sent as active messages, or received
	// issued: the data is on its way (active messages all sent) or moved.
	issued bool
	// async: a knem copy runs on the driver's thread; slot tells when
	// it is done.
	async bool
	slot  knem.Slot
	// notify: a PutNotify, whose notification with tag is still to be
	// sent once the data has moved.
	notify bool
	tag    int
	cas    bool
	// operand, compare: FetchAdd's delta, or CompareSwap's new and old
	// values. value: the word's previous value, once done.
	operand, compare, value uint64
	err                     error
	next                    *Op
}

// Value is the word's value before an atomic operation took effect: the
// old count for FetchAdd; for CompareSwap, old when the swap took place.
// It is meaningful once the operation has completed without error.
func (op *Op) Value() uint64 { return op.value }

// Len is the number of bytes the operation moves.
func (op *Op) Len() int { return op.n }

// awaitsReply: an active-message operation is complete only when its
// target has answered (applied the put, sent the data or the value).
func (op *Op) awaitsReply() bool {
	if op.kind == opAtomic {
		return op.w.atomicByAM(op.target)
	}
	return op.w.route[op.target].Mechanism == AM && op.n > 0
}

// begin checks the arguments common to every operation and sets op up.
func (w *Window) begin(op *Op, kind opKind, target, off, n int) error {
	switch {
	case op == nil:
		return errorf(ErrInvalidArg, "nil operation")
	case op.state == opPending:
		return ErrOpInUse
	case w.freed:
		return ErrFreed
	case target < 0 || target >= w.e.size:
		return errorf(ErrInvalidArg, "target rank %d in a job of %d", target, w.e.size)
	}
	if size := w.sizes[target]; off < 0 || n < 0 || off > size || n > size-off {
		return &RangeError{Target: target, Offset: off, Len: n, Size: size}
	}
	op.reset(w, kind, target, off, n)
	w.inflight[target]++
	w.total++
	return nil
}

// reset makes op a new pending operation. Field by field: assigning a
// whole Op clears all of it through the write barrier's bulk path, which
// showed at the top of a small put's profile.
func (op *Op) reset(w *Window, kind opKind, target, off, n int) {
	op.w, op.kind, op.state, op.target, op.off, op.n = w, kind, opPending, target, off, n
	op.iov, op.moved, op.issued, op.async, op.notify = nil, 0, false, false, false
	op.tag, op.cas, op.operand, op.compare, op.value = 0, false, 0, 0, 0
	op.err, op.next = nil, nil
}

// finish completes op with err.
func (w *Window) finish(op *Op, err error) {
	op.err, op.state = err, opDone
	w.inflight[op.target]--
	w.total--
}

// Put copies buf into target's part of the window from byte off. It
// returns at once; the operation is complete, and buf reusable, when Test
// or Wait says so. An access outside the target's part is refused with a
// *RangeError and writes nothing.
func (w *Window) Put(op *Op, target, off int, buf []byte) error {
	if err := w.begin(op, opPut, target, off, len(buf)); err != nil {
		return err
	}
	op.one[0] = buf
	op.iov = op.one[:]
	w.e.start(op)
	return nil
}

// PutV is Put of the bytes of iov's entries end to end, written to target
// contiguously from off (Nemesis's noncontiguous RMA: a list of address
// and length pairs). Neither the list nor its buffers may change until the
// operation completes.
func (w *Window) PutV(op *Op, target, off int, iov [][]byte) error {
	if err := w.begin(op, opPut, target, off, iovLen(iov)); err != nil {
		return err
	}
	op.iov = iov
	w.e.start(op)
	return nil
}

// PutNotify is Put followed by a notification with tag (0..nemesis.MaxTag)
// that the target receives with Notification or WaitNotification: the
// remote write with notification of RWAPI. The target sees the put's data
// in its memory once it has the notification.
func (w *Window) PutNotify(op *Op, target, off, tag int, buf []byte) error {
	if err := checkTag(tag); err != nil {
		return err
	}
	if err := w.begin(op, opPut, target, off, len(buf)); err != nil {
		return err
	}
	op.one[0] = buf
	op.iov, op.notify, op.tag = op.one[:], true, tag
	w.e.start(op)
	return nil
}

// PutNotifyV is PutNotify of a list of buffers, as PutV.
func (w *Window) PutNotifyV(op *Op, target, off, tag int, iov [][]byte) error {
	if err := checkTag(tag); err != nil {
		return err
	}
	if err := w.begin(op, opPut, target, off, iovLen(iov)); err != nil {
		return err
	}
	op.iov, op.notify, op.tag = iov, true, tag
	w.e.start(op)
	return nil
}

// Get copies len(buf) bytes of target's part of the window, from byte
// off, into buf. buf holds them once the operation completes.
func (w *Window) Get(op *Op, target, off int, buf []byte) error {
	if err := w.begin(op, opGet, target, off, len(buf)); err != nil {
		return err
	}
	op.one[0] = buf
	op.iov = op.one[:]
	w.e.start(op)
	return nil
}

// GetV is Get into iov's entries, filled one after the other from
// target's bytes off, off+1, ...
func (w *Window) GetV(op *Op, target, off int, iov [][]byte) error {
	if err := w.begin(op, opGet, target, off, iovLen(iov)); err != nil {
		return err
	}
	op.iov = iov
	w.e.start(op)
	return nil
}

// FetchAdd adds delta to the 64-bit word at off (8-byte aligned) in
// target's part of the window, atomically; op.Value() is then the word's
// previous value.
func (w *Window) FetchAdd(op *Op, target, off int, delta uint64) error {
	if err := w.beginAtomic(op, target, off); err != nil {
		return err
	}
	op.operand = delta
	w.e.start(op)
	return nil
}

// CompareSwap stores new in the 64-bit word at off (8-byte aligned) in
// target's part of the window if it holds old, atomically; op.Value() is
// then the word's previous value (old when the swap took place).
func (w *Window) CompareSwap(op *Op, target, off int, old, new uint64) error {
	if err := w.beginAtomic(op, target, off); err != nil {
		return err
	}
	op.cas, op.operand, op.compare = true, new, old
	w.e.start(op)
	return nil
}

func (w *Window) beginAtomic(op *Op, target, off int) error {
	if target >= 0 && target < w.e.size && off >= 0 && (w.addr(target)+uintptr(off))%8 != 0 {
		return errorf(ErrAlignment, "offset %d in the window of rank %d", off, target)
	}
	return w.begin(op, opAtomic, target, off, 8)
}

func checkTag(tag int) error {
	if tag < 0 || tag > nemesis.MaxTag {
		return errorf(ErrInvalidArg, "tag %d, want 0..%d", tag, nemesis.MaxTag)
	}
	return nil
}

// Test advances communication once and reports whether op has completed,
// with its error.
func (w *Window) Test(op *Op) (bool, error) {
	if op.state == opIdle || op.w != w {
		return false, errorf(ErrInvalidArg, "operation was not started on this window")
	}
	if op.state != opDone {
		if err := w.e.ep.Poll(); err != nil {
			return false, err
		}
		if op.state != opDone {
			return false, nil
		}
	}
	return true, op.err
}

// Wait blocks until op completes and returns its error. An operation whose
// target dies fails with a *TargetError naming it.
func (w *Window) Wait(op *Op) error {
	if op.state == opIdle || op.w != w {
		return errorf(ErrInvalidArg, "operation was not started on this window")
	}
	if op.state == opDone { // a put to a shared window completes where it starts
		return op.err
	}
	if err := w.e.ep.WaitUntil(func() (bool, error) { return op.state == opDone, nil }); err != nil {
		return err
	}
	return op.err
}
