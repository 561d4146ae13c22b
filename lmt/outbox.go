package lmt

import "time"

// The outbox holds transfers whose control packet found no room in the
// Control channel; Progress retries them in order. A transfer has one
// packet buffer: a newer packet of the same transfer replaces one still
// waiting (a DONE after a CTS is kept back instead, see halves.doneOwed).

// send queues a control packet for t's peer; the packet buffer of t holds
// the payload (n bytes after the header) already.
func (e *Engine) send(t *Transfer, typ pktType, status uint8, n int, length int64) {
	e.sendWithSource(t, typ, status, n, length, t.id)
}

// sendDone sends the DONE of a transfer that moved length bytes here in
// moving. The time goes in the header's source word, which no DONE needs
// (the receiver looks the transfer up by its own id), rather than in a
// payload: a 32-byte DONE fits in the line of its fastbox's flag, and the
// peer reads it with one cache miss, not two.
func (e *Engine) sendDone(t *Transfer, length int64, moving time.Duration) {
	e.sendWithSource(t, pktDone, statusOK, 0, length, uint64(max(moving, 1)))
}

func (e *Engine) sendWithSource(t *Transfer, typ pktType, status uint8, n int, length int64, src uint64) {
	p := t.packet()
	var kind uint8 // 0: no backend (the RTS named one unknown here)
	if t.ch != nil {
		kind = t.ch.slot.id
	}
	putHeader(p, typ, kind, status, n, src, t.peerID, length)
	t.pktLen = hdrLen + n
	if t.pktPending {
		return // already in the outbox: the newer packet replaces it
	}
	if len(e.outbox) == 0 {
		ok, err := e.cfg.Control.Send(t.peer, p[:t.pktLen])
		if err != nil {
			e.PeerFailed(t.peer, err)
			return
		}
		if ok {
			return
		}
	}
	t.pktPending = true
	e.outbox = append(e.outbox, t)
}

func (e *Engine) flush() {
	i := 0
	for ; i < len(e.outbox); i++ {
		t := e.outbox[i]
		ok, err := e.cfg.Control.Send(t.peer, t.pkt[:t.pktLen])
		if err != nil {
			t.pktPending = false
			e.PeerFailed(t.peer, err)
			e.recycle(t)
			continue
		}
		if !ok {
			break
		}
		t.pktPending = false
		e.recycle(t)
	}
	n := copy(e.outbox, e.outbox[i:])
	clear(e.outbox[n:])
	e.outbox = e.outbox[:n]
}
