package lmt

import "time"

// split is the flow of cma-split, multirail, multirail-knem and
// multirail-shm: the message is cut in pieces, one per rail (rails.go says
// where), and both sides copy theirs at once.
//
//	sender                          receiver
//	StartSend: [offers,] Handle     StartRecv: [Accept, ring opened,]
//	into the RTS                    SetPeerHandle, Start, cut, the cut
//	                                and Handle into the CTS
//	CTS: cut, SetPeerHandle, Start  Progress: Step the read rail's piece,
//	Progress: Step the write rail's the offload rail's copy polled
//	piece [, the ring's filled]     (rails_offload.go) [, the ring's
//	                                emptied (rails_ring.go)]
//	DONE when its piece is in       DONE when its pieces are in
//	complete when both are          complete when both are
//
// Each side says its pieces are in with a DONE at once and completes when
// it also has the other's: the receiver's reaches the sender while the
// sender is still copying, so that neither waits a crossing for the
// other's completion. Each DONE carries the bytes its side's rails moved
// (the sender's: its write piece; the receiver's: the others, the ring's
// included, which are in once it has emptied them) and the time it took
// (the receiver's from the match, the sender's write piece's from the
// CTS); the receiver's time stands for the sender's Stats.Moving (the
// pieces move at once), and the sender's feeds the receiver's measure of
// the rails (railRates.learn), with the time each of its own rails took.
//
// A side whose rail fails fails with that error and its failed DONE fails
// the other side with it (a [*RemoteError]), whatever its rails were
// doing: the write rail and the ring stop at their next Step, the offload
// copy is waited for (rails_offload.go).
type split struct{}

// halves is the state of a split transfer beside its state word, which is
// stActive while this side copies its pieces and stWaitDone once they are
// in.
type halves struct {
	bounds bounds  // the cut: where each rail's piece ends
	in     railSet // the rails offered (sender) or given a piece (receiver)
	peerIn bool    // the peer's DONE said its pieces are in
	// took is how long this side's pieces took, peerTook the peer's (0
	// until its DONE); railTook what a rail of this side's took, where
	// its end was seen apart from the side's (the receiver's two).
	took, peerTook time.Duration
	railTook       [NumRails]time.Duration
	// doneOwed: a receiver whose piece is in while its CTS still waits
	// in the outbox: a transfer has one packet buffer, and the DONE must
	// not replace the CTS the sender needs to start, so it goes at the
	// end.
	doneOwed bool
	// The receiver's offload copy: when it started, whether it runs
	// (rails_offload.go), and what its Offloader keeps.
	offStart   time.Duration
	offloading bool
	off        OffloadState
	// ring is the ring rail's piece with its cursor, and ringHeld says
	// that this transfer holds the pair's ring (rails_ring.go).
	ring     RingPiece
	ringHeld bool
}

func (split) sendRTS(e *Engine, t *Transfer, payload []byte) (int, error) {
	t.split.in |= twoRails
	n, err := t.ch.slot.b.Handle(t, payload)
	t.state = stWaitCTS
	return n, err
}

// matched cuts the message and copies the receiver's pieces while the
// sender copies the last one.
func (split) matched(e *Engine, t *Transfer) {
	in := twoRails
	if t.split.in.has(KnemRail) && t.length >= offloadMin {
		in |= 1 << KnemRail
	}
	in |= t.split.in & (1 << RingRail) // given by the ring's own checks
	t.split.in = in
	t.split.bounds = e.rails[t.peer].cut(t.length, t.ch.slot.caps.has(capWeighed), in)
	putBounds(t.packet()[hdrLen:], &t.split.bounds)
	if e.sendCTSAfter(t, boundsLen) {
		t.state = stActive
		e.finishIfEmpty(t)
	}
}

func (split) cts(e *Engine, t *Transfer, payload []byte, same bool) {
	b, handle, err := readBounds(t, payload, t.split.in)
	if err == nil {
		err = t.ch.slot.b.SetPeerHandle(t, handle)
	}
	if err != nil {
		e.fail(t, err)
		return
	}
	t.split.bounds = b
	t.moveStart = monotonic() // the write rail's time runs from here
	from, _ := b.piece(WriteRail, t.length)
	t.skip(from)
	e.activate(t)
}

// moved: this side's pieces are in.
func (split) moved(e *Engine, t *Transfer) {
	t.state = stWaitDone
	now := monotonic()
	sp := &t.split
	sp.took = now - t.moveStart
	piece, took := sp.bounds.receiverLen(t.length), sp.took
	if t.side == Sender {
		piece = t.length - piece
		t.stats.Rails[WriteRail] = piece
		from, to := sp.bounds.piece(RingRail, t.length)
		t.stats.Rails[RingRail] = to - from
		if w := sp.railTook[WriteRail]; w > 0 {
			took = w // the ring's piece ran on after the write rail's
		}
	} else {
		sp.countReceiverRails(t)
	}
	if t.pktPending {
		sp.doneOwed = true // a receiver's CTS is still in the outbox
	} else {
		e.sendDone(t, piece, took)
	}
	if sp.peerIn {
		finishSplit(e, t, now)
	}
}

// countReceiverRails puts the bytes of the receiver's rails in its Stats.
func (h *halves) countReceiverRails(t *Transfer) {
	for _, r := range receiverRails {
		from, to := h.bounds.piece(r, t.length)
		t.stats.Rails[r] = to - from
	}
}

// done: the peer's pieces of length bytes are in, after took; the transfer
// is done when ours are. A peer claiming other pieces than the cut gave
// it is corrupt.
func (split) done(e *Engine, t *Transfer, length int64, took time.Duration) {
	sp := &t.split
	what, want := "the write rail's piece has", t.length-sp.bounds.receiverLen(t.length)
	if t.side == Sender {
		what, want = "the receiver's rails' pieces have", sp.bounds.receiverLen(t.length)
	}
	if length != want {
		e.fail(t, Corrupt(t.peer, "DONE length of a split piece", "%d bytes, %s %d", length, what, want))
		return
	}
	if t.side == Sender {
		sp.countReceiverRails(t)
	} else {
		t.stats.Rails[WriteRail] = length
	}
	sp.peerIn, sp.peerTook = true, took
	if t.state == stWaitDone {
		finishSplit(e, t, monotonic())
	}
}

// end: the receiver's cursor counts its pieces, the ring's last, which it
// counts once emptied wherever its cursor stands; the sender's runs over
// its write piece and counts the ring's after it (rails_ring.go).
func (split) end(t *Transfer) int64 {
	if t.side == Receiver {
		return t.split.bounds.receiverLen(t.length)
	}
	return t.length
}

func (split) leave(e *Engine, t *Transfer, ch *channel, prev tstate) {}

// finishSplit completes either side once both sides' pieces are in. The
// receiver, which cuts the next message, learns the rails' speeds: each
// of its rails' own time where it was seen (the read rail's when an
// offload copy ran beside it), else its side's.
func finishSplit(e *Engine, t *Transfer, now time.Duration) {
	sp := &t.split
	t.moved = t.length
	t.stats.Bytes = t.length
	if sp.doneOwed {
		sp.doneOwed = false
		e.sendDone(t, sp.bounds.receiverLen(t.length), sp.took)
	}
	if t.side == Receiver {
		r := &e.rails[t.peer]
		for _, rail := range receiverRails {
			took := sp.railTook[rail]
			if took == 0 {
				took = sp.took
			}
			r.learn(rail, t.stats.Rails[rail], took)
		}
		r.learn(WriteRail, t.stats.Rails[WriteRail], sp.peerTook)
	}
	e.completeAt(t, e.arrived(t), now)
}
