package lmt

import "errors"

// pull is the flow of one-sided backends whose receiver copies (cma, knem):
//
//	sender                          receiver
//	StartSend: Handle into the RTS  StartRecv: SetPeerHandle, Start
//	                                Progress: Step until the last byte
//	                                DONE (with its time), complete
//	DONE: complete
//
// The sender moves nothing and waits for the DONE in stWaitDone from the
// start; the sender of a [Copier] (arena-copy), whose Handle copied the
// message, waits in stCopied until the next Progress hands it back to its
// user (stHanded), and its DONE then only frees the copy.
//
// A receiver that cannot pull answers with a CTS naming another
// backend instead (see Engine.settle), and the sender goes on with that
// backend's flow.
type pull struct{}

func (pull) sendRTS(e *Engine, t *Transfer, payload []byte) (int, error) {
	n, err := t.ch.slot.b.Handle(t, payload)
	t.state = stWaitDone
	if t.ch.slot.copier != nil {
		t.state = stCopied
	}
	return n, err
}

func (pull) matched(e *Engine, t *Transfer) { e.activate(t) }

// cts is never called: a CTS naming a pull backend is refused (onCTS),
// since no sender handle would come with it.
func (pull) cts(e *Engine, t *Transfer, handle []byte, same bool) {
	e.fail(t, errors.New("lmt: CTS for a pull backend"))
}

func (pull) moved(e *Engine, t *Transfer)                           { e.finishMoving(t) }
func (pull) done(e *Engine, t *Transfer, length int64)              { e.doneReceived(t, length) }
func (pull) end(t *Transfer) int64                                  { return t.length }
func (pull) leave(e *Engine, t *Transfer, ch *channel, prev tstate) {}
