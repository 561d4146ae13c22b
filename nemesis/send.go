package nemesis

// The send path: a request leaves through the destination's fastbox, a
// series of cells, or an RTS to the LMT; what cannot leave now waits in the
// destination's send queue for cells to come back.

import (
	"fmt"

	"github.com/knemesis/knemesis/internal/memcopy"
)

// queueSend appends r to the sends waiting for cells to its destination.
func (ep *Endpoint) queueSend(r *Request) {
	q := &ep.sendq[r.peer]
	if q.Empty() {
		ep.sendDsts = append(ep.sendDsts, int32(r.peer))
	}
	q.PushBack(r, &r.links)
	ep.sendsOut++
}

type sendResult int

const (
	sendBlocked sendResult = iota // out of free cells or fastbox busy
	sendDone                      // all payload is in cells or a fastbox
	sendHanded                    // RTS sent; the LMT completes the request
)

// trySend puts as much of r as it can on its way: into the destination's
// fastbox of its sequence number when it fits and the box is empty, else
// into cells taken from this rank's free queue, or as an RTS to the LMT.
func (ep *Endpoint) trySend(r *Request) (sendResult, error) {
	s := ep.seg
	p := &ep.peers[r.peer]
	if p.net {
		return ep.netSend(r)
	}
	n := r.msgLen
	if !r.seqd {
		arena := ep.viaArena(r)
		if arena {
			if res, ok, err := ep.sendArena(r); ok {
				return res, err
			}
		}
		if (n > ep.eagerMax || n > ep.chooseAbove && ep.chooser.ViaLMT(r.peer, n) || arena && ep.lmt != nil) && ep.lmtTakes(r) {
			res, err := ep.sendRTS(r)
			if err != nil && r.typ != nil && !r.seqd && ep.fatal == nil {
				r.cells = true // see lmtTakes
				return ep.trySend(r)
			}
			return res, err
		}
		if n <= linePayload && ep.sendLine(p, r) {
			return sendDone, nil
		}
		if n <= s.fboxPayload {
			fb, pl := p.outBox(&ep.stats)
			if fb == nil && p.fbOut[0] == nil {
				fb, pl = ep.claimOutBox(r.peer)
			}
			if fb != nil {
				if r.vec {
					r.gather(pl[:n])
				} else {
					memcopy.Copy(pl, r.buf[0])
				}
				p.postFbox(fb, kindMsg, r.tag, n, n)
				r.seqd = true
				ep.stats.FastboxMsgs++
				return sendDone, nil
			}
			if p.fbOut[0] != nil && (n <= ep.hold || ep.holdForBox(r)) {
				return sendBlocked, nil // busy: wait in the window (window.go, hold.go)
			}
		}
	}
	for {
		off, c, err := ep.freeQ.dequeue(s)
		if err != nil {
			return sendBlocked, ep.fail(err)
		}
		if off == 0 {
			return sendBlocked, nil
		}
		chunk := min(n-r.sent, s.payloadSize)
		if r.vec {
			r.gather(s.payload(off)[:chunk])
		} else {
			memcopy.Copy(s.payload(off), r.buf[0][r.sent:r.sent+chunk])
		}
		kind := uint32(kindCont)
		if !r.seqd {
			kind = kindMsg
			ep.stats.QueueMsgs++
		}
		r.seqd = true
		r.sent += chunk
		if err := ep.postCell(r.peer, off, c, kind, r.tag, chunk, uint64(n)); err != nil {
			return sendBlocked, err
		}
		if r.sent == n {
			return sendDone, nil
		}
	}
}

// An RTS goes through a fastbox only when the fastbox has room for the
// LMT's handle of any list of up to fboxRTSEntries entries, with its header,
// at any backend: with less room the LMT would choose its backend for lack
// of it.
const (
	fboxRTSMin     = 512
	fboxRTSEntries = 16
)

func (ep *Endpoint) sendRTS(r *Request) (sendResult, error) {
	p := &ep.peers[r.peer]
	s := ep.seg
	if s.fboxPayload >= fboxRTSMin && r.rtsFitsFbox() {
		// Like any short packet (MPICH's send_header does the same),
		// the RTS goes through its fastbox when it is free: one line
		// to poll instead of a queue to walk, on both sides.
		fb, pl := p.outBox(&ep.stats)
		if fb == nil && p.fbOut[0] == nil {
			fb, pl = ep.claimOutBox(r.peer)
		}
		if fb != nil {
			k, err := ep.startLMTSend(r, pl)
			if err != nil {
				return sendBlocked, err
			}
			p.postFbox(fb, kindRTS, r.tag, k, r.msgLen)
			r.seqd = true
			ep.stats.RTS++
			ep.stats.FastboxRTS++
			return sendHanded, nil
		}
	}
	off, c, err := ep.freeQ.dequeue(s)
	if err != nil {
		return sendBlocked, ep.fail(err)
	}
	if off == 0 {
		return sendBlocked, nil
	}
	k, err := ep.startLMTSend(r, s.payload(off))
	if err != nil {
		if qerr := ep.freeQ.enqueue(s, off, c); qerr != nil {
			return sendBlocked, ep.fail(qerr)
		}
		return sendBlocked, err
	}
	r.seqd = true
	ep.stats.RTS++
	if err := ep.postCell(r.peer, off, c, kindRTS, r.tag, k, uint64(r.msgLen)); err != nil {
		return sendBlocked, err
	}
	return sendHanded, nil
}

// startLMTSend hands send r to the LMT, which writes its RTS into pl.
func (ep *Endpoint) startLMTSend(r *Request, pl []byte) (int, error) {
	ep.holdLMT(r)
	k, err := ep.lmt.StartSend(r, pl)
	if err == nil && (k < 0 || k > len(pl)) {
		err = fmt.Errorf("nemesis: LMT StartSend returned %d bytes of RTS for a %d-byte payload", k, len(pl))
	}
	if err != nil {
		ep.releaseLMT(r)
		r.viaLMT = false
	}
	return k, err
}

// holdLMT hands r to the LMT. Until the LMT completes it, r's peer is an
// expected source: its control packets (CTS, DONE) may come through the
// fastbox, which Poll watches for expected sources only.
func (ep *Endpoint) holdLMT(r *Request) {
	r.inLMT, r.viaLMT = true, true
	ep.expect(r.peer, +1)
}

// releaseLMT takes r back from the LMT.
func (ep *Endpoint) releaseLMT(r *Request) {
	r.inLMT = false
	ep.expect(r.peer, -1)
}

// sendCell sends one single-cell packet (LMT control) if a cell is free.
func (ep *Endpoint) sendCell(dst int, kind uint32, tag int, pkt []byte, total int) (bool, error) {
	s := ep.seg
	off, c, err := ep.freeQ.dequeue(s)
	if err != nil {
		return false, ep.fail(err)
	}
	if off == 0 {
		return false, nil
	}
	memcopy.Copy(s.payload(off), pkt)
	return true, ep.postCell(dst, off, c, kind, tag, len(pkt), uint64(total))
}

// postCell hands cell c (at off), its n payload bytes written, to dst as
// a packet of kind, next in the pair's sequence, and wakes dst if it
// dozes.
func (ep *Endpoint) postCell(dst int, off uint64, c *cellHdr, kind uint32, tag, n int, total uint64) error {
	p := &ep.peers[dst]
	c.kind, c.src, c.seq, c.tag, c.len, c.total = kind, uint32(ep.rank), p.sendSeq, int32(tag), uint32(n), total
	p.sendSeq++
	ep.stats.Cells++
	if err := p.recvQ.enqueue(ep.seg, off, c); err != nil {
		return ep.fail(err)
	}
	p.wake()
	return nil
}
