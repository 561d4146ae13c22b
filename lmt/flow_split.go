package lmt

import "time"

// split is the flow of cma-split: both sides copy, each one half, at once.
//
//	sender                          receiver
//	StartSend: Handle into the RTS  StartRecv: SetPeerHandle, Start,
//	                                Handle into the CTS
//	CTS: SetPeerHandle, Start       Progress: Step [0, SplitPoint)
//	Progress: Step [SplitPoint, length)
//	DONE when its half is in        DONE when its half is in
//	complete when both are          complete when both are
//
// Each side says its half is in with a DONE at once and completes when it
// also has the other's: the receiver's reaches the sender while the
// sender is still copying, so that neither waits a crossing for the
// other's completion. The receiver's DONE carries its time from the match,
// which stands for the sender's Stats.Moving (both halves move at once);
// the sender's is not timed (see sendDone).
type split struct{}

// halves is the state of a split transfer beside its state word, which is
// stActive while this side copies its half and stWaitDone once it is in.
type halves struct {
	peerIn bool // the peer's DONE said its half is in
	// doneOwed: a receiver whose half is in while its CTS still waits in
	// the outbox: a transfer has one packet buffer, and the DONE must not
	// replace the CTS the sender needs to start, so it goes at the end.
	doneOwed bool
}

func (split) sendRTS(e *Engine, t *Transfer, payload []byte) (int, error) {
	n, err := t.ch.slot.b.Handle(t, payload)
	t.state = stWaitCTS
	return n, err
}

func (split) matched(e *Engine, t *Transfer) {
	if e.sendCTS(t) {
		t.state = stActive // copy the first half while the sender copies the second
		e.finishIfEmpty(t)
	}
}

func (split) cts(e *Engine, t *Transfer, handle []byte, same bool) {
	if err := t.ch.slot.b.SetPeerHandle(t, handle); err != nil {
		e.fail(t, err)
		return
	}
	t.skip(SplitPoint(t.length)) // the receiver copies the first half
	e.activate(t)
}

// moved: this side's half is in.
func (split) moved(e *Engine, t *Transfer) {
	t.state = stWaitDone
	now := time.Duration(0)
	switch {
	case t.side == Sender:
		e.sendWithSource(t, pktDone, statusOK, 0, t.moved, 0)
	case t.pktPending:
		t.split.doneOwed = true
	default:
		now = monotonic()
		e.sendDone(t, t.moved, now-t.moveStart)
	}
	if !t.split.peerIn {
		return
	}
	if now == 0 {
		now = monotonic()
	}
	finishSplit(e, t, now)
}

// done: the peer's half is in; the transfer is done when ours is.
func (split) done(e *Engine, t *Transfer, length int64) {
	t.split.peerIn = true
	if t.state == stWaitDone {
		finishSplit(e, t, monotonic())
	}
}

func (split) end(t *Transfer) int64 {
	if t.side == Receiver {
		return SplitPoint(t.length)
	}
	return t.length
}

func (split) leave(e *Engine, t *Transfer, ch *channel, prev tstate) {}

// finishSplit completes either side once both halves are in.
func finishSplit(e *Engine, t *Transfer, now time.Duration) {
	t.moved = t.length
	t.stats.Bytes = t.length
	if t.split.doneOwed {
		t.split.doneOwed = false
		e.sendDone(t, t.length, now-t.moveStart)
	}
	e.completeAt(t, e.truncation(t), now)
}
