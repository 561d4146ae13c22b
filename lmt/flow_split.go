package lmt

import "time"

// split is the flow of cma-split and multirail: the message is cut in
// two pieces (rails.go says where), and both sides copy theirs at once.
//
//	sender                          receiver
//	StartSend: Handle into the RTS  StartRecv: SetPeerHandle, Start, cut,
//	                                the cut and Handle into the CTS
//	CTS: cut, SetPeerHandle, Start  Progress: Step [0, cut) (read rail)
//	Progress: Step [cut, length) (write rail)
//	DONE when its piece is in       DONE when its piece is in
//	complete when both are          complete when both are
//
// Each side says its piece is in with a DONE at once and completes when
// it also has the other's: the receiver's reaches the sender while the
// sender is still copying, so that neither waits a crossing for the
// other's completion. Each DONE carries the bytes its rail moved and the
// time it took (the receiver's from the match, the sender's from the
// CTS); the receiver's time stands for the sender's Stats.Moving (both
// pieces move at once), and the sender's feeds the receiver's measure of
// the rails (railRates.learn).
type split struct{}

// halves is the state of a split transfer beside its state word, which is
// stActive while this side copies its piece and stWaitDone once it is in.
type halves struct {
	cut    int64 // where the read rail's piece ends and the write rail's begins
	peerIn bool  // the peer's DONE said its piece is in
	// took is how long this side's piece took, peerTook the peer's (0
	// until its DONE).
	took, peerTook time.Duration
	// doneOwed: a receiver whose piece is in while its CTS still waits
	// in the outbox: a transfer has one packet buffer, and the DONE must
	// not replace the CTS the sender needs to start, so it goes at the
	// end.
	doneOwed bool
}

func (split) sendRTS(e *Engine, t *Transfer, payload []byte) (int, error) {
	n, err := t.ch.slot.b.Handle(t, payload)
	t.state = stWaitCTS
	return n, err
}

// matched cuts the message and copies the first piece while the sender
// copies the second.
func (split) matched(e *Engine, t *Transfer) {
	t.split.cut = e.rails[t.peer].cut(t.length, t.ch.slot.weighed)
	putCut(t.packet()[hdrLen:], t.split.cut)
	if e.sendCTSAfter(t, cutLen) {
		t.state = stActive
		e.finishIfEmpty(t)
	}
}

func (split) cts(e *Engine, t *Transfer, payload []byte, same bool) {
	c, handle, err := readCut(t, payload)
	if err == nil {
		err = t.ch.slot.b.SetPeerHandle(t, handle)
	}
	if err != nil {
		e.fail(t, err)
		return
	}
	t.split.cut = c
	t.moveStart = monotonic() // the write rail's time runs from here
	t.skip(c)
	e.activate(t)
}

// moved: this side's piece is in.
func (split) moved(e *Engine, t *Transfer) {
	t.state = stWaitDone
	now := monotonic()
	t.split.took = now - t.moveStart
	piece := t.moved
	if t.side == Sender {
		piece -= t.split.cut
	}
	t.stats.Rails[railOf(t.side)] = piece
	if t.pktPending {
		t.split.doneOwed = true // a receiver's CTS is still in the outbox
	} else {
		e.sendDone(t, piece, t.split.took)
	}
	if t.split.peerIn {
		finishSplit(e, t, now)
	}
}

// done: the peer's piece of length bytes is in, after took; the transfer
// is done when ours is. A peer claiming another piece than the cut gave
// it is corrupt.
func (split) done(e *Engine, t *Transfer, length int64, took time.Duration) {
	peerRail := railOf(Sender)
	want := t.length - t.split.cut
	if t.side == Sender {
		peerRail, want = ReadRail, t.split.cut
	}
	if length != want {
		e.fail(t, Corrupt(t.peer, "DONE length of a split piece", "%d bytes, the %s rail's piece has %d", length, peerRail, want))
		return
	}
	t.stats.Rails[peerRail] = length
	t.split.peerIn, t.split.peerTook = true, took
	if t.state == stWaitDone {
		finishSplit(e, t, monotonic())
	}
}

func (split) end(t *Transfer) int64 {
	if t.side == Receiver {
		return t.split.cut
	}
	return t.length
}

func (split) leave(e *Engine, t *Transfer, ch *channel, prev tstate) {}

// finishSplit completes either side once both pieces are in. The
// receiver, which cuts the next message, learns the rails' speeds.
func finishSplit(e *Engine, t *Transfer, now time.Duration) {
	t.moved = t.length
	t.stats.Bytes = t.length
	if t.split.doneOwed {
		t.split.doneOwed = false
		e.sendDone(t, t.stats.Rails[ReadRail], t.split.took)
	}
	if t.side == Receiver {
		r := &e.rails[t.peer]
		r.learn(ReadRail, t.stats.Rails[ReadRail], t.split.took)
		r.learn(WriteRail, t.stats.Rails[WriteRail], t.split.peerTook)
	}
	e.completeAt(t, e.arrived(t), now)
}
