package lmt

import (
	"errors"
	"time"
)

// pull is the flow of one-sided backends whose receiver copies (cma, knem):
//
//	sender                          receiver
//	StartSend: Handle into the RTS  StartRecv: SetPeerHandle, Start
//	                                Progress: Step until the last byte
//	                                DONE (with its time), complete
//	DONE: complete
//
// The sender moves nothing and waits for the DONE in stWaitDone from the
// start; the sender of a [Copier] (arena-copy) fills its copy of the
// message in stCopied, one Progress a piece while the receiver copies the
// pieces out, then is handed back to its user (stHanded), and its DONE only
// frees the copy.
//
// A receiver that cannot pull answers with a CTS naming another
// backend instead (see Engine.settle), and the sender goes on with that
// backend's flow.
type pull struct{}

func (pull) sendRTS(e *Engine, t *Transfer, payload []byte) (int, error) {
	n, err := t.ch.slot.b.Handle(t, payload)
	t.state = stWaitDone
	if t.ch.slot.copier != nil && err == nil {
		// The first piece is in before the RTS leaves: the receiver
		// starts on it at once.
		t.state = stCopied
		if err = e.fillPiece(t); err != nil {
			t.ch.slot.copier.Release(t) // StartSend drops t: no completion will
		}
	}
	return n, err
}

// fillCopy copies the next piece of a Copier sender's message into its
// copy; once the whole message is in, the copy becomes its buffer and the
// send completes for its user.
func (e *Engine) fillCopy(t *Transfer) {
	if err := e.fillPiece(t); err != nil {
		e.fail(t, err)
		return
	}
	if t.moved == t.length {
		t.useCopy()
		handBack(e, t)
	}
}

// fillPiece has the Copier copy the next piece, if any is left.
func (e *Engine) fillPiece(t *Transfer) error {
	if t.moved == t.length {
		return nil
	}
	n, err := t.ch.slot.copier.Fill(t, int(min(int64(t.ch.slot.chunk), t.length-t.moved)))
	if err != nil {
		return err
	}
	e.bytes += uint64(n)
	t.advance(n)
	return nil
}

func (pull) matched(e *Engine, t *Transfer) { e.activate(t) }

// cts is never called: a CTS naming a pull backend is refused (onCTS),
// since no sender handle would come with it.
func (pull) cts(e *Engine, t *Transfer, handle []byte, same bool) {
	e.fail(t, errors.New("lmt: CTS for a pull backend"))
}

func (pull) moved(e *Engine, t *Transfer)                               { e.finishMoving(t) }
func (pull) done(e *Engine, t *Transfer, length int64, _ time.Duration) { e.doneReceived(t, length) }
func (pull) end(t *Transfer) int64                                      { return t.length }
func (pull) leave(e *Engine, t *Transfer, ch *channel, prev tstate)     {}
