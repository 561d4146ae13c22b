package lmt

import "time"

// stream is the flow of two-sided backends whose channel both sides
// Step, the sender putting bytes in and the receiver taking them out (shm,
// pipe, vmsplice):
//
//	sender                          receiver
//	StartSend: RTS, no handle;      StartRecv: claim the channel (or queue
//	may fill early (channel.fill)   behind the message reading it), Start,
//	                                CTS
//	CTS: commit, Start, push when   Progress: Step until the last byte
//	its turn comes
//	Progress: Step until the last
//	byte is in the channel          DONE (with its time), complete
//	(Buffered: complete for the
//	user now)
//	DONE: complete
//
// The channel (channel.go) does the scheduling between the messages that
// share it; this file only moves one message through it.
type stream struct{}

func (stream) sendRTS(e *Engine, t *Transfer, payload []byte) (int, error) {
	t.state = stWaitCTS
	t.ch.enlist(t)
	return 0, nil
}

func (stream) matched(e *Engine, t *Transfer) { t.ch.claim(e, t) }

func (stream) cts(e *Engine, t *Transfer, handle []byte, same bool) {
	t.ch.commit(e, t, same)
	t.ch.passEarly(e)
}

// moved: a receiver has read the last byte; a sender has put it in the
// channel, where the receiver may not have read it yet.
func (stream) moved(e *Engine, t *Transfer) {
	if t.side == Receiver {
		e.finishMoving(t)
		return
	}
	t.state = stWaitDone
	t.ch.pushed(e, t)
	if t.ch.slot.caps.has(capBuffered) {
		handBack(e, t)
	}
}

// handBack completes a sender on a Buffered backend for its user: every
// byte is in the channel, which holds a copy, and the receiver committed to
// them with its CTS (a sender pushes only after it). The transfer stays
// live until the receiver's DONE, which completeAt then takes quietly.
func handBack(e *Engine, t *Transfer) {
	t.state = stHanded
	t.stats.Elapsed = monotonic() - t.started
	t.stats.Bytes = t.length
	if e.cfg.OnComplete != nil {
		e.cfg.OnComplete(t)
	}
}

func (stream) done(e *Engine, t *Transfer, length int64, _ time.Duration) {
	e.doneReceived(t, length)
}
func (stream) end(t *Transfer) int64 { return t.length }

func (stream) leave(e *Engine, t *Transfer, ch *channel, prev tstate) {
	if t.side == Sender {
		ch.leaveSender(e, t, prev)
	} else {
		ch.leaveReceiver(e, t, prev)
	}
}
