package nemesis

// Aggregation, the first strategy of Aumage, Brunet, Furmento and Namyst,
// "NewMadeleine: a Fast Communication Scheduling Engine for High
// Performance Networks" (CAC 2007): small messages waiting in a window
// leave packed into one cell, each with its own header, instead of one
// cell (two queue operations and a cache miss or more on each side) each.
//
// Rendezvous requests travel the same way, as the paper's do: the RTS
// of a large message waiting in the window behind or before small ones
// joins them in the cell, its LMT handle as its bytes. So do the LMT's
// control packets (CTS, DONE) and active messages that find the window
// holding small messages: they must follow them, and leave in their cell.
//
// An aggregate cell (kindAgg) names its first sequence number in the
// cell header, its message count in total and the bytes it uses in len.
// Its payload is the messages one after the other, each an aggHdr then
// the message's bytes (kindMsg) or its LMT handle (kindRTS), each header
// at an 8-byte boundary:
//
//	seq   uint32  the message's own sequence number (first + i)
//	tag   int32
//	len   uint32  bytes that follow: the whole message, or the handle
//	kind  uint32  kindMsg or kindRTS
//	total uint64  the message's length (kindMsg: len)
//
// The cell takes count sequence numbers, so the messages keep their
// places among the fastbox messages around them; the receiver hands each
// message to the matching code exactly as if it had come alone, so
// ordering, wildcard matching, Probe and truncation see separate
// messages. Everything in an aggregate cell is checked before use: a
// header that runs past len, a wrong sequence number or kind, or a count
// that does not end at len fails the sender (trust.go), after the
// well-formed messages before it were delivered.

import (
	"encoding/binary"

	"github.com/knemesis/knemesis/internal/memcopy"
	"github.com/knemesis/knemesis/peerfault"
)

const (
	aggHdrSize = 24
	aggAlign   = 8
)

// Aggregate packs the small messages waiting in a window into as few cells
// as they fit in, and holds a small message whose fastbox is busy in the
// window until the next Poll, for the messages behind it to join it. A
// message is small when at least two of its size fit in one cell with
// their headers. A lone small message still takes a free fastbox. The
// RTS of a large message, and LMT or active-message packets, that wait
// among small messages join them in their cell.
var Aggregate Strategy = aggregate{}

type aggregate struct{}

func (aggregate) String() string           { return "aggregate" }
func (aggregate) holdMax(ep *Endpoint) int { return ep.seg.payloadSize/2 - aggHdrSize }

func (aggregate) schedule(ep *Endpoint, dst int) error {
	if ep.peers[dst].net {
		// A cell is no packet the network module carries: a remote
		// rank's window leaves message by message.
		return Straightforward.schedule(ep, dst)
	}
	q := &ep.sendq[dst]
	for r := q.Front(); r != nil; r = q.Front() {
		next := r.links.Next()
		alone := next == nil || !ep.packable(next)
		switch {
		case !ep.packable(r) || alone && !ep.aggregable(r):
			if !ep.sendFront(r) {
				return ep.fatal
			}
		case alone && ep.sendFbox(r):
		case alone && ep.holdForBox(r):
			return ep.fatal // its box may empty before a cell would leave (hold.go)
		default:
			if ok, err := ep.sendAggregate(dst); err != nil || !ok {
				return err
			}
		}
	}
	return ep.fatal
}

// packable tells whether send r, waiting in a window, may go in an
// aggregate cell: whole when small, or as its RTS.
func (ep *Endpoint) packable(r *Request) bool {
	return ep.aggregable(r) || ep.rendezvous(r)
}

// rendezvous tells whether send r goes by the LMT whatever the chooser
// says, with an RTS that fits the room a fastbox guarantees.
func (ep *Endpoint) rendezvous(r *Request) bool {
	return !r.seqd && ep.lmt != nil && r.msgLen > ep.eagerMax && ep.lmtTakes(r) && r.rtsFitsFbox() && !ep.viaArena(r)
}

// aggregable tells whether send r, waiting in a window, may go in an
// aggregate cell: it is small, eager, and none of it left yet.
func (ep *Endpoint) aggregable(r *Request) bool {
	return ep.aggregableUpTo(r, ep.aggregateMax())
}

// aggregateMax is the longest message aggregable admits: the endpoint's
// limits, read once per cell rather than once per message.
func (ep *Endpoint) aggregateMax() int { return min(ep.hold, ep.eagerMax, ep.chooseAbove) }

// aggregableUpTo is aggregable with aggregateMax already read.
func (ep *Endpoint) aggregableUpTo(r *Request, limit int) bool {
	return !r.seqd && r.msgLen <= limit && !ep.viaArena(r)
}

// sendFbox sends r, the front of its window, through its fastbox if the
// box is free, and reports whether it did.
func (ep *Endpoint) sendFbox(r *Request) bool {
	n := r.msgLen
	if n > ep.seg.fboxPayload {
		return false
	}
	p := &ep.peers[r.peer]
	if n <= linePayload && ep.sendLine(p, r) {
		ep.leaveWindow(r)
		ep.finish(r, n, nil)
		return true
	}
	fb, pl := p.outBox(&ep.stats)
	if fb == nil {
		return false
	}
	r.gatherAll(pl[:n])
	p.postFbox(fb, kindMsg, r.tag, n, n)
	r.seqd = true
	ep.stats.FastboxMsgs++
	ep.leaveWindow(r)
	ep.finish(r, n, nil)
	return true
}

// sendAggregate packs the aggregable sends at the front of dst's window
// into one cell, as many as fit, and reports false when no cell is free.
func (ep *Endpoint) sendAggregate(dst int) (bool, error) {
	s := ep.seg
	off, c, err := ep.freeQ.dequeue(s)
	if err != nil {
		return false, ep.fail(err)
	}
	if off == 0 {
		return false, nil
	}
	q, pl := &ep.sendq[dst], s.payload(off)
	seq, end, count := ep.peers[dst].sendSeq, 0, uint32(0)
	// The entries are numbered from seq: a packet the LMT would send from
	// inside StartSend must not take a number meanwhile (see
	// sendBehindWindow).
	ep.packing = true
	defer func() { ep.packing = false }()
	limit := ep.aggregateMax()
	for r := q.Front(); r != nil; r = q.Front() {
		// Each message is classified once: aggregable, else an RTS
		// (packable), else the cell ends.
		small := ep.aggregableUpTo(r, limit)
		if !small && !ep.rendezvous(r) {
			break
		}
		at := alignAgg(end)
		room := len(pl) - at - aggHdrSize
		if !small {
			if room < fboxRTSMin {
				break
			}
			k, err := ep.startLMTSend(r, pl[at+aggHdrSize:])
			if err != nil {
				ep.leaveWindow(r)
				ep.finish(r, 0, err)
				continue
			}
			putAggHdr(pl[at:], seq+count, r.tag, k, kindRTS, r.msgLen)
			end = at + aggHdrSize + k
			count++
			r.seqd = true
			ep.stats.RTS++
			ep.leaveWindow(r) // the LMT completes it
			continue
		}
		n := r.msgLen
		if room < n {
			break // aggregable(first) guarantees that one fits
		}
		putAggHdr(pl[at:], seq+count, r.tag, n, kindMsg, n)
		r.gatherAll(pl[at+aggHdrSize : at+aggHdrSize+n])
		end = at + aggHdrSize + n
		count++
		r.seqd = true
		ep.leaveWindow(r)
		ep.finish(r, n, nil)
	}
	if count == 0 {
		// Every request taken failed its StartSend: nothing to send.
		if err := ep.freeQ.enqueue(s, off, c); err != nil {
			return false, ep.fail(err)
		}
		return true, nil
	}
	return true, ep.postAggregate(dst, off, c, seq, end, count)
}

// postAggregate sends cell off, filled with count entries numbered from
// seq that end at byte end, to dst.
func (ep *Endpoint) postAggregate(dst int, off uint64, c *cellHdr, seq uint32, end int, count uint32) error {
	p := &ep.peers[dst]
	c.kind, c.src, c.seq, c.tag, c.len, c.total = kindAgg, uint32(ep.rank), seq, 0, uint32(end), uint64(count)
	p.sendSeq += count
	ep.stats.Cells++
	ep.stats.AggregateCells++
	ep.stats.Aggregated += uint64(count)
	if err := p.recvQ.enqueue(ep.seg, off, c); err != nil {
		return ep.fail(err)
	}
	p.wake()
	return nil
}

// gatherAll copies the whole message of send r into dst, len(dst) bytes.
func (r *Request) gatherAll(dst []byte) {
	if r.vec {
		r.gather(dst)
	} else {
		memcopy.Copy(dst, r.buf[0])
	}
}

func putAggHdr(b []byte, seq uint32, tag, n int, kind uint32, total int) {
	binary.LittleEndian.PutUint32(b[0:], seq)
	binary.LittleEndian.PutUint32(b[4:], uint32(int32(tag)))
	binary.LittleEndian.PutUint32(b[8:], uint32(n))
	binary.LittleEndian.PutUint32(b[12:], kind)
	binary.LittleEndian.PutUint64(b[16:], uint64(total))
}

// arriveAggregate delivers the count messages of an aggregate cell from
// src, the first numbered seq (already counted in recvSeq), one by one
// as separate messages. pl is the cell's used payload, untrusted.
func (ep *Endpoint) arriveAggregate(src int, seq uint32, count uint64, pl []byte) error {
	p := &ep.peers[src]
	if count == 0 || count > uint64(len(pl)/aggHdrSize) {
		return ep.distrust(peerfault.Corrupt(src, "count of an aggregate cell", "%d messages in %d bytes", count, len(pl)))
	}
	at := 0
	for i := range uint32(count) {
		at = alignAgg(at)
		if at+aggHdrSize > len(pl) {
			return ep.distrust(peerfault.Corrupt(src, "count of an aggregate cell", "message %d of %d starts past its %d bytes", i, count, len(pl)))
		}
		h := pl[at : at+aggHdrSize]
		mseq, tag := binary.LittleEndian.Uint32(h), int32(binary.LittleEndian.Uint32(h[4:]))
		n, kind := binary.LittleEndian.Uint32(h[8:]), binary.LittleEndian.Uint32(h[12:])
		total := binary.LittleEndian.Uint64(h[16:])
		whole := kind == kindMsg || kind == kindControl || kind == kindAM
		sized := whole && total == uint64(n) || kind == kindRTS && total <= uint64(maxInt)
		if mseq != seq+i || !sized || tag < 0 || uint64(n) > uint64(len(pl)-at-aggHdrSize) {
			return ep.distrust(peerfault.Corrupt(src, "entry of an aggregate cell", "message %d of %d has sequence %d (want %d), kind %d, tag %d, %d bytes of %d left for a %d-byte message",
				i, count, mseq, seq+i, kind, tag, n, len(pl)-at-aggHdrSize, total))
		}
		if i > 0 {
			p.recvSeq++
		}
		at += aggHdrSize
		var err error
		if kind == kindMsg {
			// The common entry goes straight to matching.
			err = ep.arrive(src, int(tag), kind, int(total), pl[at:at+int(n)])
		} else {
			err = ep.arrivePacked(src, int(tag), kind, int(total), pl[at:at+int(n)])
		}
		if err != nil || p.dead != nil {
			return err // failed by what a handler found
		}
		at += int(n)
	}
	if at != len(pl) {
		return ep.distrust(peerfault.Corrupt(src, "length of an aggregate cell", "%d messages end at byte %d of %d", count, at, len(pl)))
	}
	return nil
}

// arrivePacked hands one entry of an aggregate cell to what the same
// packet alone would have gone to.
func (ep *Endpoint) arrivePacked(src, tag int, kind uint32, total int, data []byte) error {
	switch kind {
	case kindControl:
		if ep.lmt == nil {
			return errorf(ErrNoLMT, "control packet from rank %d", src)
		}
		return ep.lmt.HandleControl(src, ep.private(data))
	case kindAM:
		return ep.handleAM(src, ep.private(data))
	}
	return ep.arrive(src, tag, kind, total, data)
}

// sendBehindWindow sends pkt, an LMT control packet or an active message
// of kind, to dst, whose window holds sends that it must follow. With the
// aggregate strategy, when those sends are all small and fit in one cell
// with pkt, they leave together; otherwise ok is false and the caller
// retries once the window has drained. It packs no RTS: it runs inside
// the LMT's calls, which must not re-enter the LMT.
func (ep *Endpoint) sendBehindWindow(dst int, kind uint32, pkt []byte) (bool, error) {
	s := ep.seg
	q := &ep.sendq[dst]
	end := 0
	for r := q.Front(); r != nil; r = r.links.Next() {
		if !ep.aggregable(r) {
			return false, nil
		}
		end = alignAgg(end) + aggHdrSize + r.msgLen
	}
	if ep.hold < 0 || ep.packing || alignAgg(end)+aggHdrSize+len(pkt) > s.payloadSize {
		return false, nil
	}
	off, c, err := ep.freeQ.dequeue(s)
	if err != nil {
		return false, ep.fail(err)
	}
	if off == 0 {
		return false, nil
	}
	p, pl := &ep.peers[dst], s.payload(off)
	seq, end, count := p.sendSeq, 0, uint32(0)
	for r := q.Front(); r != nil; r = q.Front() {
		at := alignAgg(end)
		putAggHdr(pl[at:], seq+count, r.tag, r.msgLen, kindMsg, r.msgLen)
		r.gatherAll(pl[at+aggHdrSize : at+aggHdrSize+r.msgLen])
		end, count, r.seqd = at+aggHdrSize+r.msgLen, count+1, true
		ep.leaveWindow(r)
		ep.finish(r, r.msgLen, nil)
	}
	at := alignAgg(end)
	putAggHdr(pl[at:], seq+count, 0, len(pkt), kind, len(pkt))
	copy(pl[at+aggHdrSize:], pkt)
	end, count = at+aggHdrSize+len(pkt), count+1
	if kind == kindControl {
		ep.stats.PackedCtrl++
	}
	return true, ep.postAggregate(dst, off, c, seq, end, count)
}

func alignAgg(n int) int { return (n + aggAlign - 1) &^ (aggAlign - 1) }
