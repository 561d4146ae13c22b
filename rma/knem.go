package rma

import (
	"fmt"

	"github.com/knemesis/knemesis/kmod/knem"
)

// openKnem opens /dev/knem once per engine; knemErr says why it failed.
func (e *engine) openKnem() *knem.Device {
	if !e.knemOpen {
		e.knemOpen = true
		e.knem, e.knemErr = knem.Open()
	}
	return e.knem
}

// copyKnem moves op with one synchronous INLINE_COPY against the target's
// persistent region: the kernel copies once, between this rank's buffers
// and the target's pages.
func (w *Window) copyKnem(op *Op) error {
	dir := knem.Write
	if op.kind == opGet {
		dir = knem.Read
	}
	p := &w.peers[op.target]
	st, err := w.e.knem.InlineCopy(dir, op.iov, p.cookie, uint64(op.off), uint64(op.n), 0, 0)
	if err != nil {
		return fmt.Errorf("rma: knem copy with rank %d: %w", op.target, err)
	}
	if st != knem.StatusSuccess {
		return fmt.Errorf("rma: knem copy with rank %d: status %v", op.target, st)
	}
	op.moved = op.n
	return nil
}
