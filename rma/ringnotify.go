package rma

import (
	"fmt"
	"github.com/knemesis/knemesis/peerfault"
	"time"
	"unsafe"

	"github.com/knemesis/knemesis/internal/lineops"
	"github.com/knemesis/knemesis/nemesis"
)

// The notifications of an allocated window come through this rank's ring
// (ring.go), not through the endpoint: taking one reads the ring, and only
// a wait that finds nothing polls the endpoint, now and then, for the
// active messages, collective steps and liveness checks it must still
// serve.

// stepRing advances a PutNotify on an allocated window: data and
// notification, in the order ring.go explains. more: the ring has no room
// yet (Progress tries again, the later operations toward the target
// behind this one).
func (w *Window) stepRing(op *Op) (more bool) {
	r := &w.rings[op.target]
	if !op.issued && op.n > ringEarly {
		w.copyLocal(op)
		op.issued = true
	}
	t, ok := r.reserve()
	if !ok {
		r.announce()
		if t, ok = r.reserve(); !ok {
			return true
		}
	}
	if !op.issued {
		w.copyLocal(op)
		op.issued = true
	}
	r.publish(t, w.e.rank, op.tag, op.off, op.n)
	w.e.ep.Wake(op.target) // it may doze in a wait: no packet wakes it
	op.notify = false
	return false
}

// A wait reads the ring ringSpins times between two polls of the
// endpoint for its first ringEagerPolls polls, the microseconds in which
// a notification usually lands: a poll costs several looks at the ring,
// and a notification that lands during one waits for its end. Then it
// reads it once a poll, so that it yields the CPU after as many polls as
// any blocked call (nemesis.SpinBeforeYield): a rank that shares its CPU
// with the one it waits for must not keep it longer.
const (
	ringSpins      = 256
	ringEagerPolls = 16
)

// notificationRing is Notification on an allocated window.
func (w *Window) notificationRing(src, tag int) (Notification, bool, error) {
	if err := w.checkSource(src); err != nil {
		return Notification{}, false, err
	}
	if n, ok, err := w.nextNote(src, tag); ok || err != nil {
		return n, ok, err
	}
	if err := w.e.ep.Poll(); err != nil {
		return Notification{}, false, err
	}
	return w.nextNote(src, tag)
}

// waitRing is WaitNotification on an allocated window.
func (w *Window) waitRing(src, tag int) (n Notification, err error) {
	if err := w.checkSource(src); err != nil {
		return n, err
	}
	var ok bool
	polls := 0
	err = w.e.ep.WaitUntil(func() (bool, error) {
		spins := 1
		if polls++; polls <= ringEagerPolls {
			spins = ringSpins
		}
		for range spins {
			if n, ok, err = w.nextNote(src, tag); ok || err != nil {
				return ok, err
			}
		}
		if err := w.e.silent(src); err != nil {
			return false, err
		}
		return false, w.heldByGone()
	})
	return n, err
}

// heldByGone fails a wait whose ring has stayed stuck for heldGrace at a
// position a producer took and has not published, while some rank is
// gone: the gone rank is likely the holder (ring.go), and nothing behind
// that position can come. A live holder is only slow (descheduled between
// its compare-and-swap and its store of the stamp): the grace lets it
// finish, and the slot is never skipped, so that a live holder's record
// is not lost should the wait fail all the same.
func (w *Window) heldByGone() error {
	e := w.e
	if e.nDead == 0 || !w.ring.held() {
		return nil
	}
	now := time.Now()
	if w.ring.stuckAt != w.ring.pos+1 {
		w.ring.stuckAt, w.ring.stuckSince = w.ring.pos+1, now
		return nil
	}
	if now.Sub(w.ring.stuckSince) < heldGrace {
		return nil
	}
	var gone []int
	for r, err := range e.dead {
		if err != nil {
			gone = append(gone, r)
		}
	}
	return targetGone(gone[0], fmt.Errorf("position %d of rank %d's notification ring of window %d was taken and not written for %v, and ranks %v are gone: %w",
		w.ring.pos, e.rank, w.id, heldGrace, gone, e.dead[gone[0]]))
}

// heldGrace is how long a ring may stay stuck at a position taken and not
// published, while a rank is gone, before waits on it fail.
const heldGrace = time.Second

func (w *Window) checkSource(src int) error {
	if src != nemesis.AnySource && (src < 0 || src >= w.e.size) {
		return errorf(ErrInvalidArg, "source rank %d in a job of %d", src, w.e.size)
	}
	return nil
}

// nextNote takes the oldest notification from src with tag: from those
// set aside first, then from the ring, setting aside those that do not
// match. A record newer than every one set aside that matches is the
// oldest that does.
func (w *Window) nextNote(src, tag int) (Notification, bool, error) {
	if w.notes.len() > 0 {
		if n, ok := w.notes.take(src, tag); ok {
			return n, true, nil
		}
	}
	for {
		n, ok := w.takeRing()
		if !ok {
			return n, false, nil
		}
		if err := w.checkNote(&n); err != nil {
			return n, false, err
		}
		if (src == nemesis.AnySource || n.Source == src) && (tag == nemesis.AnyTag || n.Tag == tag) {
			if n.Len > 0 {
				// The caller reads the data next, as a fastbox's
				// receiver its payload: ask for its first line now.
				lineops.Prefetch(unsafe.Pointer(&w.local[n.Offset]))
			}
			return n, true, nil
		}
		w.notes.push(n)
	}
}

// checkNote refuses a record naming bytes outside this rank's part, or no
// rank of the job: nothing in the ring is trusted blindly.
func (w *Window) checkNote(n *Notification) error {
	if n.Source >= w.e.size || n.Source == w.e.rank {
		// No rank to blame: the stamp that names the writer is wrong.
		return errorf(ErrCorrupt, "notification ring of window %d holds %+v, in a job of %d", w.id, *n, w.e.size)
	}
	if n.Tag < 0 || n.Tag > nemesis.MaxTag || !w.inside(uint64(n.Offset), uint64(n.Len)) {
		return peerfault.Corrupt(n.Source, "notification record", "tag %d, %d bytes at offset %d of window %d, whose part here has %d bytes",
			n.Tag, n.Len, n.Offset, w.id, len(w.local))
	}
	return nil
}

// takeRing takes the record at the head of this rank's ring, if
// published, and counts it for the endpoint's progress (nemesis.AMMeter).
// When producers announced that they wait for room, it wakes the ranks
// that doze: they may be among them.
func (w *Window) takeRing() (Notification, bool) {
	n, ok := w.ring.take()
	if !ok {
		return n, false
	}
	w.e.moved++
	if w.ring.waiters() {
		for r := range w.e.size {
			w.e.ep.Wake(r)
		}
	}
	return n, true
}

// drainRings sets aside what the rings of allocated windows hold, at every
// Progress: initiators whose target polls but takes no notifications for
// a while are not held up by a full ring, and a rank about to doze in a
// wait sees, in its last Poll, the notification that came in between
// (nemesis.AMMeter).
func (e *engine) drainRings() error {
	for _, w := range e.ringWins {
		for {
			n, ok := w.takeRing()
			if !ok {
				break
			}
			if err := w.checkNote(&n); err != nil {
				return err
			}
			w.notes.push(n)
		}
	}
	return nil
}
