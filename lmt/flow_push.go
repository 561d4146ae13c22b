package lmt

import "time"

// push is the flow of one-sided backends whose sender copies (cma-write):
//
//	sender                          receiver
//	StartSend: RTS, no handle       StartRecv: Start, Handle into the CTS
//	CTS: SetPeerHandle, Start
//	Progress: Step until the last byte
//	DONE (with its time), complete  DONE: complete
//
// The sender's Stats.Moving runs from the CTS: before it, the receive was
// not posted.
type push struct{}

func (push) sendRTS(e *Engine, t *Transfer, payload []byte) (int, error) {
	t.state = stWaitCTS
	return 0, nil
}

func (push) matched(e *Engine, t *Transfer) {
	if e.sendCTS(t) {
		t.state = stWaitDone
	}
}

func (push) cts(e *Engine, t *Transfer, handle []byte, same bool) {
	if t.moved > 0 {
		t.rewind() // filled early on the backend the receiver refused
	}
	t.moveStart = monotonic() // see Stats.Moving
	if err := t.ch.slot.b.SetPeerHandle(t, handle); err != nil {
		e.fail(t, err)
		return
	}
	e.activate(t)
}

func (push) moved(e *Engine, t *Transfer)                               { e.finishMoving(t) }
func (push) done(e *Engine, t *Transfer, length int64, _ time.Duration) { e.doneReceived(t, length) }
func (push) end(t *Transfer) int64                                      { return t.length }
func (push) leave(e *Engine, t *Transfer, ch *channel, prev tstate)     {}
