package nemesis

import (
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/lineops"
)

// Line rings: the fastboxes of the smallest messages. Beside its
// fboxSlots fastboxes, every set holds a ring of lineSlots slots of half a
// cache line each, for messages of up to linePayload bytes, and a line
// where the receiver counts the slots it consumed.
//
// A fastbox costs each message a line that both sides write: the sender
// fills it, the receiver clears its flag, and the sender must read that
// flag back before it reuses the box. In a stream of small messages the
// line then crosses between the cores three times a message, and the
// sender waits on the receiver's clear. A ring slot is written by its
// sender only, and the receiver publishes how many slots it consumed every
// lineRelease slots; the sender reads that count only when the ring looks
// full by the count it last read. This is how UCX's shared-memory
// transports and MPICH's cell queue under Nemesis's fastbox both keep a
// small message to one transfer: the receiver of a UCX mm FIFO never
// writes an element and publishes its tail every half FIFO.
//
// A message takes a record of one slot when its payload fits beside the
// record's header (lineShort bytes), of two otherwise. Two records of the
// smallest messages then share a line: a receiver behind its sender, as
// in a stream, takes two messages for each line that crosses between the
// cores, as an Open MPI vader fastbox, a ring of bytes, packs consecutive
// small messages. That matters most where the two cores sit far apart,
// and a line costs a message most of its time.
//
// Every slot begins with a stamp, the slot's running number in the ring
// plus one, which the sender stores last, with release order: the stamp of
// a record's head after its continuation's. The receiver compares the
// stamp at its running number with the one it expects, so a slot of the
// previous lap, a head or a continuation, reads as empty without anyone
// clearing it, and no payload byte ever sits where a stamp is read: a
// record's payload is split around its continuation's stamp.
//
// Records share the pair's sequence numbers with the fastboxes and the
// cells, so the receiver takes the next message from whichever of the
// three holds its number, and order, wildcard matching, probe and
// truncation are as for any message. Only whole eager messages (kindMsg)
// take them; RTS, LMT control and active messages keep the fastboxes.
// Unlike a fastbox, a record carries no acknowledgment of the sender's
// own receives: the header has no room for it beside the sequence number.
const (
	lineSlotSize = lineSize / 2
	lineSlots    = 32
	lineRelease  = lineSlots / 2
	lineHdrSize  = int(unsafe.Sizeof(lineHdr{}))
	// lineContHdr: the stamp that begins a continuation slot.
	lineContHdr = 4
	// lineShort: the payload of a one-slot record; linePayload: of a
	// two-slot one, the most a record holds.
	lineShort   = lineSlotSize - lineHdrSize
	linePayload = lineShort + lineSlotSize - lineContHdr
	// lineRingSize is the bytes of one set's ring and its count.
	lineRingSize = lineSlots*lineSlotSize + lineSize
	// linePrefetchAhead is how many slots ahead of the record it writes a
	// sender asks for a slot's line: a few transfers in flight at once,
	// well inside the half ring that a release frees.
	linePrefetchAhead = 8
)

// lineHdr heads a record; a continuation slot holds only its stamp.
type lineHdr struct {
	stamp atomic.Uint32 // the slot's running number + 1
	seq   uint32
	tag   int32
	len   uint32
}

type lineSlot [lineSlotSize]byte

// lineRing is one set's slots and the receiver's count of those it
// consumed, on a line of its own that only the receiver writes.
type lineRing struct {
	slot [lineSlots]lineSlot
	done atomic.Uint32
	_    [lineSize - 4]byte
}

var (
	_ [lineRingSize - unsafe.Sizeof(lineRing{})]byte
	_ [unsafe.Sizeof(lineRing{}) - lineRingSize]byte
)

// lineRing returns the line ring of fastbox set set of rank owner. The
// caller has checked set < s.fastboxes.
func (s *segment) lineRing(owner, set int) *lineRing {
	off := s.fboxOff + (uint64(owner)*uint64(s.fastboxes)+uint64(set))*s.fboxSetSize() + fboxSlots*uint64(s.fastboxSize)
	return (*lineRing)(unsafe.Add(s.base, off))
}

// at returns the slot of running number n.
func (r *lineRing) at(n uint32) *lineSlot { return &r.slot[n%lineSlots] }

// head returns the slot of running number n read as a record's head.
func (r *lineRing) head(n uint32) *lineHdr { return (*lineHdr)(unsafe.Pointer(r.at(n))) }

// stamp returns the stamp that begins the slot of running number n.
func (r *lineRing) stamp(n uint32) *atomic.Uint32 { return &r.head(n).stamp }

// lineRecordSlots is the slots of the record of a message of n bytes.
func lineRecordSlots(n int) uint32 {
	if n <= lineShort {
		return 1
	}
	return 2
}

// outLine reports whether the ring to the rank has room for a record of
// slots slots. The count the receiver published is read only when the
// ring is too full by the one read last; a count ahead of what was sent,
// which only a corrupt receiver writes, reads as a full ring.
func (p *peer) outLine(slots uint32) bool {
	r := p.lnOut
	if r == nil {
		return false
	}
	if p.lnSent-p.lnFree > lineSlots-slots {
		if free := r.done.Load(); free != p.lnFree {
			// The rank consumes again: it is not busy elsewhere, and
			// its sends may wait for their boxes (hold.go).
			p.lnFree, p.holdOff = free, 0
		}
		if p.lnSent-p.lnFree > lineSlots-slots {
			return false
		}
	}
	return true
}

// postLine hands the record of slots slots at the ring's next running
// number, its payload written, to the rank as the next message of the
// pair, of tag and n bytes.
func (p *peer) postLine(slots uint32, tag, n int) {
	r := p.lnOut
	h := r.head(p.lnSent)
	h.seq, h.tag, h.len = p.sendSeq, int32(tag), uint32(n)
	if slots == 2 {
		lineops.StoreRelease(r.stamp(p.lnSent+1), p.lnSent+2)
	}
	p.sendSeq++
	lineops.StoreRelease(&h.stamp, p.lnSent+1)
	p.lnSent += slots
	if p.lnSent+linePrefetchAhead-p.lnFree < lineSlots {
		// Ask now for the line of a slot linePrefetchAhead ahead,
		// known free: the transfers of the next lines from the
		// receiver's core then overlap one another and this one, instead
		// of each waiting behind the previous store in the store buffer.
		lineops.PrefetchWrite(unsafe.Pointer(r.at(p.lnSent + linePrefetchAhead)))
	}
	p.announce()
}

// inLine returns the head of the record that holds the rank's next
// message, or nil.
func (p *peer) inLine() *lineHdr {
	r := p.lnIn
	if r == nil {
		return nil
	}
	h := r.head(p.lnRecv)
	if h.stamp.Load() != p.lnRecv+1 || h.seq != p.recvSeq {
		return nil
	}
	return h
}

// takeLine delivers the message of record h, src's next, to the receive
// it matches or as unexpected.
func (ep *Endpoint) takeLine(src int, h *lineHdr) error {
	data, err := ep.openLine(src, h)
	if err != nil {
		return err
	}
	err = ep.arrive(src, int(h.tag), kindMsg, len(data), data)
	ep.peers[src].closeLine(len(data))
	return err
}

// takeLineInto delivers the message of record h, the next from r's
// source, to r, which it matches and which no earlier receive precedes.
func (ep *Endpoint) takeLineInto(r *Request, h *lineHdr) error {
	data, err := ep.openLine(r.peer, h)
	if err != nil {
		ep.finish(r, 0, err)
		return err
	}
	ep.matched++
	r.tag, r.msgLen = int(h.tag), len(data)
	r.deliver(data)
	ep.peers[r.peer].closeLine(len(data))
	ep.finishRecv(r)
	return nil
}

// openLine checks record h, src's next message, and moves src's sequence
// past it; it returns the payload, which stays the sender's (or sits in
// lineBuf) until closeLine.
func (ep *Endpoint) openLine(src int, h *lineHdr) ([]byte, error) {
	p := &ep.peers[src]
	n := int(h.len)
	if n > linePayload {
		return nil, ep.fail(errorf(ErrCorrupt, "line record from rank %d: %d bytes (max %d)", src, n, linePayload))
	}
	if p.asm.req != nil || p.asm.ux != nil {
		return nil, ep.fail(errorf(ErrCorrupt, "line record from rank %d inside a multi-cell message", src))
	}
	head := p.lnIn.at(p.lnRecv)
	data := head[lineHdrSize:][:min(n, lineShort)]
	if n > lineShort {
		if got, want := p.lnIn.stamp(p.lnRecv+1).Load(), p.lnRecv+2; got != want {
			return nil, ep.fail(errorf(ErrCorrupt, "line record from rank %d: continuation stamped %d, want %d", src, got, want))
		}
		copy(ep.lineBuf[:], data)
		copy(ep.lineBuf[lineShort:n], p.lnIn.at(p.lnRecv + 1)[lineContHdr:])
		data = ep.lineBuf[:n]
	}
	ep.arrived++
	p.recvSeq++
	return data, nil
}

// closeLine gives the slots of the n-byte message just delivered back to
// its sender, publishing the count of consumed slots each time it passes
// a multiple of lineRelease: the payload has been copied out.
func (p *peer) closeLine(n int) {
	p.released = p.recvSeq
	was := p.lnRecv
	p.lnRecv += lineRecordSlots(n)
	if p.lnRecv/lineRelease != was/lineRelease {
		// A release store: the payload was copied out before. An XCHG
		// would wait for the count's line to come back from the sender,
		// which reads it while the ring looks full.
		lineops.StoreRelease(&p.lnIn.done, p.lnRecv)
	}
}

// sendLine sends r, a whole message of at most linePayload bytes, through
// the pair's line ring if it has room, and reports whether it did.
func (ep *Endpoint) sendLine(p *peer, r *Request) bool {
	n := r.msgLen
	slots := lineRecordSlots(n)
	if !p.outLine(slots) {
		return false
	}
	head := p.lnOut.at(p.lnSent)
	if slots == 1 {
		r.gatherAll(head[lineHdrSize:][:n])
	} else {
		r.gatherAll(ep.lineBuf[:n])
		copy(head[lineHdrSize:], ep.lineBuf[:lineShort])
		copy(p.lnOut.at(p.lnSent + 1)[lineContHdr:], ep.lineBuf[lineShort:n])
	}
	p.postLine(slots, r.tag, n)
	r.seqd = true
	ep.stats.FastboxMsgs++
	ep.stats.LineMsgs++
	return true
}
