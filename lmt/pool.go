package lmt

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/datatype"
)

// pool keeps released transfers with their packet buffer and iovec
// storage, so that in steady state a large message allocates nothing. A
// transfer goes back to it once its user released it and the engine holds
// it nowhere: not in the live list, not in the outbox.
type pool struct {
	spare []*Transfer
}

// newTransfer takes a transfer from the pool, or allocates one while the
// pool is empty (the first transfers, or callers that never Release). The
// iovec list is copied into storage the transfer keeps, so that a caller
// may build it in a temporary.
func (e *Engine) newTransfer(peer int, side Side, iov [][]byte) *Transfer {
	var t *Transfer
	if n := len(e.spare); n > 0 {
		t = e.spare[n-1]
		e.spare[n-1] = nil
		e.spare = e.spare[:n-1]
		t.reset()
	} else {
		t = &Transfer{}
	}
	t.e, t.peer, t.side = e, peer, side
	t.iov = append(t.iov, iov...)
	return t
}

// reset clears a pooled transfer for its next message, keeping the
// storage it grew (iovec and segment lists, packet buffer, datatype
// arrays). Field by field, not *t = Transfer{...}: the composite literal
// built the 800-byte value on the stack and copied it in through the
// write barrier's bulk path, twice per message. TestResetClearsEveryField
// fails when a field added to Transfer is not cleared here.
func (t *Transfer) reset() {
	t.User, t.e, t.ch, t.flow, t.err = nil, nil, nil, nil, nil
	t.id, t.peerID, t.peer, t.side, t.state, t.failedFrom = 0, 0, 0, 0, 0, 0
	t.iov, t.msgLen, t.length, t.moved, t.seg, t.off = t.iov[:0], 0, 0, 0, 0, 0
	t.remote, t.rseg, t.roff = t.remote[:0], 0, 0
	t.dt.reset()
	t.stats, t.started, t.moveStart = Stats{}, 0, 0
	t.grantedIn, t.split, t.copied = 0, halves{}, nil
	t.pktLen, t.pktPending, t.inLive, t.released = 0, false, false, false
}

// drop returns a transfer that never went live to the pool.
func (e *Engine) drop(t *Transfer) {
	t.released = true
	e.recycle(t)
}

func (e *Engine) goLive(t *Transfer) {
	t.inLive = true
	e.live = append(e.live, t)
}

// sweep drops completed transfers from the live list, keeping order.
func (e *Engine) sweep() {
	j := 0
	for _, t := range e.live {
		if t.state != stDone {
			e.live[j] = t
			j++
			continue
		}
		t.inLive = false
		e.recycle(t)
	}
	clear(e.live[j:])
	e.live = e.live[:j]
}

// Release gives a completed transfer back to the Engine, which reuses it,
// with its packet buffer and iovec storage, for a later StartSend or
// StartRecv: in steady state a large message then allocates nothing. The
// caller must not touch t afterwards. A transfer never released is simply
// garbage collected.
func (e *Engine) Release(t *Transfer) error {
	if t == nil || t.e != e {
		return errors.New("lmt: Release of a transfer this engine did not start")
	}
	if !t.Done() {
		return fmt.Errorf("lmt: Release of %v still in flight", t)
	}
	if t.released {
		return fmt.Errorf("lmt: %v released twice", t)
	}
	t.released = true
	e.recycle(t)
	return nil
}

// recycle pools t once it is released and the engine holds it nowhere.
func (e *Engine) recycle(t *Transfer) {
	if !t.released || t.inLive || t.pktPending || e.closed {
		return
	}
	// Do not keep the caller's buffers, or its description, alive.
	clear(t.iov)
	if t.dt.local != nil {
		t.dt.local, t.dt.base, t.dt.lcur = nil, nil, datatype.Cursor{}
		t.dt.lstage.Reset(nil, 0)
	}
	t.User = nil
	e.spare = append(e.spare, t)
}
