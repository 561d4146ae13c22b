package lmt

import "time"

// A flow runs the rendezvous of one kind of backend (see [Flow]) on both
// sides: what the RTS and CTS carry, who Steps, who sends DONE and what
// completes each side. A Transfer holds the flow of its backend, chosen
// once when its backend is (StartSend, StartRecv, or a CTS naming
// another), so that the engine's entry points call one method where they
// would otherwise branch on the flow, the side and the state. Flows keep
// no state of their own: what a transfer needs is in the Transfer and, for
// streams, its channel.
type flow interface {
	// sendRTS readies a sender on its backend: it writes the handle the
	// RTS carries, if any, into payload and returns its length.
	sendRTS(e *Engine, t *Transfer, payload []byte) (int, error)
	// matched starts a receiver settled on its backend (the sender's
	// handle, if any, already given to the backend).
	matched(e *Engine, t *Transfer)
	// cts goes on with a sender once the receiver's CTS, carrying
	// handle, has arrived. same reports that the CTS names the backend
	// the sender chose (not a fallback).
	cts(e *Engine, t *Transfer, handle []byte, same bool)
	// moved is called when this side has moved all it had to move.
	moved(e *Engine, t *Transfer)
	// done takes the peer's successful DONE, which says it moved length
	// bytes in took (0: not timed).
	done(e *Engine, t *Transfer, length int64, took time.Duration)
	// end is where this side's copying stops.
	end(t *Transfer) int64
	// leave releases what t held on ch: it completed, from state prev,
	// or moved to another backend.
	leave(e *Engine, t *Transfer, ch *channel, prev tstate)
}

func flowOf(f Flow) flow {
	switch f {
	case Pull:
		return pull{}
	case Push:
		return push{}
	case Split:
		return split{}
	}
	return stream{}
}

// activate starts t on its backend and lets Progress Step it.
func (e *Engine) activate(t *Transfer) {
	if err := t.ch.slot.b.Start(t); err != nil {
		e.fail(t, err)
		return
	}
	t.state = stActive
	e.finishIfEmpty(t)
}

// finishIfEmpty ends an active side with nothing (left) to move: an empty
// message, or a stream sender that filled early all a truncating
// receiver takes (moved then passes length).
func (e *Engine) finishIfEmpty(t *Transfer) {
	if t.state == stActive && t.moved >= t.flow.end(t) {
		t.flow.moved(e, t)
	}
}

// sendCTS starts a receiver of a push or split transfer on its backend and
// sends the CTS with the handle its sender needs.
func (e *Engine) sendCTS(t *Transfer) bool { return e.sendCTSAfter(t, 0) }

// sendCTSAfter is sendCTS with the handle after the lead bytes that the
// flow wrote at the start of the CTS payload (a split's cut).
func (e *Engine) sendCTSAfter(t *Transfer, lead int) bool {
	b := t.ch.slot.b
	if err := b.Start(t); err != nil {
		e.fail(t, err)
		return false
	}
	n, err := b.Handle(t, t.packet()[hdrLen+lead:])
	if err != nil {
		e.fail(t, err)
		return false
	}
	e.send(t, pktCTS, 0, lead+n, t.length)
	return true
}
