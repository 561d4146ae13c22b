package rma

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem"
)

// knemAsyncMin is the size from which a knem copy runs on the driver's
// kernel thread and completes through a slot of the status array, polled
// by later Progress calls: a shorter copy costs less than the slot's round
// trips, a longer one would hold up the progress loop (knemlmt's
// DefaultAsyncMin, for the same reason).
const knemAsyncMin = 256 << 10

// openKnem opens /dev/knem and maps its status array once per engine;
// knemErr says why the device could not be opened. Without a status array
// every copy is synchronous.
func (e *engine) openKnem() *knem.Device {
	if !e.knemOpen {
		e.knemOpen = true
		e.knem, e.knemErr = knem.Open()
		if e.knem != nil {
			e.knemStatus, _ = e.knem.MapStatus(4096)
			if info, err := e.knem.Info(); err == nil {
				e.knemFeatures = info.Features
			}
		}
	}
	return e.knem
}

// copyKnem moves op with one INLINE_COPY against the target's persistent
// region: the kernel copies once, between this rank's buffers and the
// target's pages. From knemAsyncMin on, the copy runs on the driver's
// thread; more reports that its slot is still pending.
func (w *Window) copyKnem(op *Op) (more bool, err error) {
	e := w.e
	if op.async {
		return w.knemDone(op)
	}
	dir := knem.Write
	if op.kind == opGet {
		dir = knem.Read
	}
	var flags knem.Flags
	var slot knem.Slot
	if op.n >= knemAsyncMin && e.knemStatus != nil {
		if slot, op.async = e.knemStatus.Alloc(); op.async {
			flags = knem.FlagMemcpyThread
		}
	}
	p := &w.peers[op.target]
	st, err := e.knem.InlineCopy(dir, op.iov, p.cookie, uint64(op.off), uint64(op.n), flags, slot)
	if err == nil && st == knem.StatusPending && op.async {
		op.slot = slot
		return true, nil
	}
	if op.async {
		e.knemStatus.Free(slot)
		op.async = false
	}
	switch {
	case err != nil && errors.Is(err, unix.EINVAL) && e.alive(op.target) != nil:
		// The cookie is gone with the process that declared it.
		return false, e.alive(op.target)
	case err != nil:
		return false, fmt.Errorf("rma: knem copy of %d bytes with rank %d: %w", op.n, op.target, err)
	case st != knem.StatusSuccess:
		return false, fmt.Errorf("rma: knem copy of %d bytes with rank %d: status %v", op.n, op.target, st)
	}
	op.moved = op.n
	return false, nil
}

// knemDone polls the slot of op's asynchronous copy.
func (w *Window) knemDone(op *Op) (bool, error) {
	s := w.e.knemStatus
	st, err := s.Status(op.slot)
	if err != nil {
		return false, fmt.Errorf("rma: knem copy with rank %d: %w", op.target, err)
	}
	if st == knem.StatusPending {
		return true, nil
	}
	op.async = false
	if err := s.Free(op.slot); err != nil {
		return false, fmt.Errorf("rma: knem copy with rank %d: %w", op.target, err)
	}
	if st != knem.StatusSuccess {
		return false, fmt.Errorf("rma: knem copy of %d bytes with rank %d: status %v", op.n, op.target, st)
	}
	op.moved = op.n
	return false, nil
}
