package nemesis

import (
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/lineops"
)

// Line boxes: the fastboxes of the smallest messages. Beside its
// fboxSlots fastboxes, every set holds a ring of lineBoxes boxes of one
// cache line each, for messages of up to linePayload bytes, and a line
// where the receiver counts the ones it consumed.
//
// A fastbox costs each message a line that both sides write: the sender
// fills it, the receiver clears its flag, and the sender must read that
// flag back before it reuses the box. In a stream of small messages the
// line then crosses between the cores three times a message, and the
// sender waits on the receiver's clear. A line box is written by its
// sender only. Its flag is a stamp, the box's index in the ring plus one,
// which the receiver compares with the index it expects: a box of the
// previous lap reads as empty without anyone clearing it. The receiver
// publishes how many line boxes it consumed every lineRelease messages,
// and the sender reads that count only when the ring looks full by the
// count it last read. A message then moves one line from the sender's core
// to the receiver's and back as a shared copy, which is how UCX's
// shared-memory transports and MPICH's cell queue under Nemesis's fastbox
// both keep a small message to one transfer: the receiver of a UCX
// mm FIFO never writes an element and publishes its tail every half FIFO.
//
// Line boxes share the pair's sequence numbers with the fastboxes and the
// cells, so the receiver takes the next message from whichever of the
// three holds its number, and order, wildcard matching, probe and
// truncation are as for any message. Only whole eager messages (kindMsg)
// take them; RTS, LMT control and active messages keep the fastboxes.
const (
	lineBoxes   = 16
	lineRelease = lineBoxes / 2
	// linePayload: the payload that shares its box's line with the
	// fastbox header.
	linePayload = lineSize - fboxHdrSize
	// lineRingSize is the bytes of one set's ring and its count.
	lineRingSize = (lineBoxes + 1) * lineSize
	// linePrefetchAhead is how far ahead of the box it writes a sender
	// asks for a box's line: a few transfers in flight at once, well
	// inside the half ring that a release frees.
	linePrefetchAhead = 4
)

type lineBox struct {
	hdr fboxHdr // full is the stamp: the box's ring index + 1
	pl  [linePayload]byte
}

// lineRing is one set's line boxes and the receiver's count of those it
// consumed, on a line of its own that only the receiver writes.
type lineRing struct {
	box  [lineBoxes]lineBox
	done atomic.Uint32
	_    [lineSize - 4]byte
}

var (
	_ [lineSize - unsafe.Sizeof(lineBox{})]byte
	_ [unsafe.Sizeof(lineBox{}) - lineSize]byte
	_ [lineRingSize - unsafe.Sizeof(lineRing{})]byte
	_ [unsafe.Sizeof(lineRing{}) - lineRingSize]byte
)

// lineRing returns the line boxes of fastbox set set of rank owner. The
// caller has checked set < s.fastboxes.
func (s *segment) lineRing(owner, set int) *lineRing {
	off := s.fboxOff + (uint64(owner)*uint64(s.fastboxes)+uint64(set))*s.fboxSetSize() + fboxSlots*uint64(s.fastboxSize)
	return (*lineRing)(unsafe.Add(s.base, off))
}

// outLine returns the line box the next message to the rank may take, or
// nil when the pair has no set or the ring is full. The count the receiver
// published is read only when the ring is full by the one read last; a
// count ahead of what was sent, which only a corrupt receiver writes,
// reads as a full ring.
func (p *peer) outLine() *lineBox {
	r := p.lnOut
	if r == nil {
		return nil
	}
	if p.lnSent-p.lnFree >= lineBoxes {
		if free := r.done.Load(); free != p.lnFree {
			// The rank consumes again: it is not busy elsewhere, and
			// its sends may wait for their boxes (hold.go).
			p.lnFree, p.holdOff = free, 0
		}
		if p.lnSent-p.lnFree >= lineBoxes {
			return nil
		}
	}
	return &r.box[p.lnSent%lineBoxes]
}

// postLine hands l, the box outLine returned, its n payload bytes
// written, to the rank as the next message of the pair, of tag.
func (p *peer) postLine(l *lineBox, tag, n int) {
	l.hdr.seq, l.hdr.tag, l.hdr.len, l.hdr.kind, l.hdr.ack, l.hdr.total = p.sendSeq, int32(tag), uint32(n), kindMsg, p.released, uint64(n)
	p.sendSeq++
	p.lnSent++
	lineops.StoreRelease(&l.hdr.full, p.lnSent)
	if p.lnSent+linePrefetchAhead-p.lnFree < lineBoxes {
		// Ask now for the line of a box linePrefetchAhead sends ahead,
		// known free: the transfers of the next boxes' lines from the
		// receiver's core then overlap one another and this one, instead
		// of each waiting behind the previous store in the store buffer.
		lineops.PrefetchWrite(unsafe.Pointer(&p.lnOut.box[(p.lnSent+linePrefetchAhead)%lineBoxes]))
	}
	p.announce()
}

// inLine returns the line box that holds the rank's next message, or nil.
func (p *peer) inLine() *lineBox {
	r := p.lnIn
	if r == nil {
		return nil
	}
	l := &r.box[p.lnRecv%lineBoxes]
	if l.hdr.full.Load() != p.lnRecv+1 || l.hdr.seq != p.recvSeq {
		return nil
	}
	return l
}

// takeLine delivers the message in l, src's next, to the receive it
// matches or as unexpected.
func (ep *Endpoint) takeLine(src int, l *lineBox) error {
	data, err := ep.openLine(src, l)
	if err != nil {
		return err
	}
	err = ep.arrive(src, int(l.hdr.tag), kindMsg, len(data), data)
	ep.peers[src].closeLine()
	return err
}

// takeLineInto delivers the message in l, the next from r's source, to r,
// which it matches and which no earlier receive precedes.
func (ep *Endpoint) takeLineInto(r *Request, l *lineBox) error {
	data, err := ep.openLine(r.peer, l)
	if err != nil {
		ep.finish(r, 0, err)
		return err
	}
	ep.matched++
	r.tag, r.msgLen = int(l.hdr.tag), len(data)
	r.deliver(data)
	ep.peers[r.peer].closeLine()
	ep.finishRecv(r)
	return nil
}

// openLine checks the header of l, src's next message, and moves src's
// sequence past it; it returns the payload, which stays the sender's
// until closeLine.
func (ep *Endpoint) openLine(src int, l *lineBox) ([]byte, error) {
	p := &ep.peers[src]
	n := int(l.hdr.len)
	if n > linePayload || l.hdr.kind != kindMsg || l.hdr.total != uint64(n) {
		return nil, ep.fail(errorf(ErrCorrupt, "line box from rank %d: kind %d, %d bytes of %d (max %d)", src, l.hdr.kind, n, l.hdr.total, linePayload))
	}
	if p.asm.req != nil || p.asm.ux != nil {
		return nil, ep.fail(errorf(ErrCorrupt, "line box message from rank %d inside a multi-cell message", src))
	}
	p.acked = l.hdr.ack
	ep.arrived++
	p.recvSeq++
	return l.pl[:n], nil
}

// closeLine gives the box of the message just delivered back to its
// sender, publishing the count of consumed boxes every lineRelease
// messages: the payload has been copied out.
func (p *peer) closeLine() {
	p.released = p.recvSeq
	p.lnRecv++
	if p.lnRecv%lineRelease == 0 {
		// A release store: the payload was copied out before. An XCHG
		// would wait for the count's line to come back from the sender,
		// which reads it while the ring looks full.
		lineops.StoreRelease(&p.lnIn.done, p.lnRecv)
	}
}

// sendLine sends r, a whole message of at most linePayload bytes, through
// the pair's next line box if one is free, and reports whether it did.
func (ep *Endpoint) sendLine(p *peer, r *Request) bool {
	l := p.outLine()
	if l == nil {
		return false
	}
	n := r.msgLen
	r.gatherAll(l.pl[:n])
	p.postLine(l, r.tag, n)
	r.seqd = true
	ep.stats.FastboxMsgs++
	ep.stats.LineMsgs++
	return true
}
