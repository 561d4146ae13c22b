package lmt

import (
	"errors"
	"time"
)

// finishMoving completes a side that moved the last byte and whose DONE
// completes the peer: the receiver of a pull or stream transfer, the
// sender of a push one. The DONE tells the peer how long the move took.
func (e *Engine) finishMoving(t *Transfer) {
	now := monotonic()
	e.sendDone(t, t.moved, now-t.moveStart)
	e.completeAt(t, e.arrived(t), now)
}

// doneReceived completes t on the peer's successful DONE, which says the
// peer moved length bytes.
func (e *Engine) doneReceived(t *Transfer, length int64) {
	if t.side == Receiver || t.state == stWaitDone || t.state == stHanded || t.state == stCopied {
		t.stats.Bytes = length
		e.complete(t, e.arrived(t))
		return
	}
	// A stream sender normally has pushed everything by now; a DONE
	// before that means the receiver took less (it may stop early only
	// with an error, which is not this DONE).
	e.complete(t, nil)
}

// arrived finishes a side whose message is all in, as it completes:
// a receiver scatters its staged small blocks (typed.go), and learns
// whether the message was truncated.
func (e *Engine) arrived(t *Transfer) error {
	t.unstage()
	return e.truncation(t)
}

// fail completes t with err and tells the peer, unless the peer is gone
// (a peer that wrote a corrupt value is told: its side fails too).
func (e *Engine) fail(t *Transfer, err error) {
	if t.state == stDone || t.state == stFailing {
		return
	}
	if !errors.Is(err, ErrPeerGone) {
		msg := err.Error()
		p := t.packet()[hdrLen:]
		n := copy(p, msg)
		e.send(t, pktDone, statusFailed, n, t.moved)
	}
	if t.ch != nil {
		t.ch.slot.b.Abort(t)
	}
	e.complete(t, err)
}

// abort completes t with err without telling the peer, which is gone or
// whose engine is closing too.
func (e *Engine) abort(t *Transfer, err error) {
	if t.state == stDone || t.state == stFailing {
		return
	}
	if t.ch != nil {
		t.ch.slot.b.Abort(t)
	}
	e.complete(t, err)
}

func (e *Engine) complete(t *Transfer, err error) { e.completeAt(t, err, monotonic()) }

// completeAt is complete with the time already read: the receiver's DONE
// path reads it anyway, and a clock read is not free.
func (e *Engine) completeAt(t *Transfer, err error, now time.Duration) {
	prev := t.state
	if prev == stDone || prev == stFailing {
		return
	}
	if err != nil && !t.quiet() {
		t.state, t.err, t.failedFrom = stFailing, err, prev
		return
	}
	e.finish(t, err, prev, now)
}

// quiet reports whether t's backend has nothing in flight that may still
// write into t's buffers (see [Quiescer]).
func (t *Transfer) quiet() bool {
	return t.ch == nil || t.ch.slot.quiescer == nil || t.ch.slot.quiescer.Quiet(t)
}

// quiesce completes a failing transfer with its error once its backend is
// quiet: Progress calls it, never a backend.
func (e *Engine) quiesce(t *Transfer) {
	if t.quiet() {
		e.finish(t, t.err, t.failedFrom, monotonic())
	}
}

// finish takes t out of the engine, completed with err, from state prev.
func (e *Engine) finish(t *Transfer, err error, prev tstate, now time.Duration) {
	if t.ch != nil {
		t.ch.slot.release(t)
	}
	switch prev {
	case stHanded:
		// Its user saw it succeed: the bytes were in the channel. A
		// receiver failing now reports that on its own side.
		t.state = stDone
		e.unregister(t)
		if err == nil && e.cfg.OnMeasured != nil {
			e.cfg.OnMeasured(t)
		}
		return
	}
	t.state, t.err = stDone, err
	t.stats.Elapsed = now - t.started
	if t.stats.Moving == 0 {
		t.stats.Moving = now - t.moveStart
	}
	if t.stats.Bytes < t.moved {
		t.stats.Bytes = t.moved
	}
	e.unregister(t)
	if t.ch != nil {
		t.flow.leave(e, t, t.ch, prev)
	}
	if e.cfg.OnComplete != nil {
		e.cfg.OnComplete(t)
	}
}

// release gives back what t holds on the backend of s besides its buffers.
func (s *backendSlot) release(t *Transfer) {
	switch {
	case s.copier != nil && t.side == Sender:
		s.copier.Release(t)
	case s.releaser != nil:
		s.releaser.Release(t)
	}
}
