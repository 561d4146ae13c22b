package nemesis

import (
	"cmp"
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/lineops"
	"github.com/knemesis/knemesis/peerfault"
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
// and a line costs a message most of its time. A two-slot record always
// fills a whole line: one whose turn comes in a line's second slot leaves
// its fields there and lies in the next line. Straddling two lines, it
// would share each with the records beside it, and the receiver would
// read lines the sender is still writing.
//
// Every slot holds a stamp, the slot's running number in the ring plus
// one, which the sender stores last, with release order: the stamp of a
// record's first slot after its second's. The receiver compares the stamp
// at its running number with the one it expects, so a slot of the previous
// lap reads as empty without anyone clearing it. No payload byte ever lies
// where a stamp is read: a line's first slot has its stamp at its start,
// its second at its end,
//
//	first slot:  stamp | seq tag len | payload (16 bytes)
//	second slot: seq tag len | payload (16 bytes) | stamp
//
// and a two-slot record runs its payload from the first slot's payload
// over the second slot's fields and payload, 44 bytes in one piece, up to
// the second slot's stamp.
//
// Records share the pair's sequence numbers with the fastboxes and the
// cells, so the receiver takes the next message from whichever of the
// three holds its number, and order, wildcard matching, probe and
// truncation are as for any message. Only whole eager messages (kindMsg)
// take them; RTS, LMT control and active messages keep the fastboxes.
// Unlike a fastbox, a record carries no acknowledgment of the sender's
// own receives: the fields have no room for it beside the sequence number.
const (
	lineSlotSize   = lineSize / 2
	lineSlots      = 32
	lineRelease    = lineSlots / 2
	lineStampSize  = 4
	lineFieldsSize = 12 // lineFields
	// lineShort: the payload of a one-slot record; linePayload: of a
	// two-slot one, the most a record holds.
	lineShort   = lineSlotSize - lineStampSize - lineFieldsSize
	linePayload = lineSize - 2*lineStampSize - lineFieldsSize
	// lineRingSize is the bytes of one set's ring and its count.
	lineRingSize = lineSlots*lineSlotSize + lineSize
	// linePrefetchAhead is how many slots ahead of the record it writes a
	// sender asks for a slot's line: a few transfers in flight at once,
	// well inside the half ring that a release frees.
	linePrefetchAhead = 8
)

// lineFields describe a record's message.
type lineFields struct {
	seq uint32
	tag int32
	len uint32
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
	_ [lineFieldsSize - unsafe.Sizeof(lineFields{})]byte
	_ [unsafe.Sizeof(lineFields{}) - lineFieldsSize]byte
	_ [lineShort - 16]byte
	_ [16 - lineShort]byte
)

// lineRing returns the line ring of fastbox set set of rank owner. The
// caller has checked set < s.fastboxes.
func (s *segment) lineRing(owner, set int) *lineRing {
	off := s.fboxOff + (uint64(owner)*uint64(s.fastboxes)+uint64(set))*s.fboxSetSize() + fboxSlots*uint64(s.fastboxSize)
	return (*lineRing)(unsafe.Add(s.base, off))
}

// The parts of the slot of running number n: where they lie depends on
// which half of its line the slot is (n&1). They are found by offsets from
// the ring's base, not by indexing, so that no access checks the base
// against nil: that check loads the ring's first line, which the other
// side writes.

// slotOff is the offset of the slot of running number n in its ring.
func slotOff(n uint32) uintptr { return uintptr(n%lineSlots) * lineSlotSize }

// stamp returns the slot's stamp.
func (r *lineRing) stamp(n uint32) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Add(unsafe.Pointer(r), slotOff(n)+uintptr(n&1)*(lineSlotSize-lineStampSize)))
}

// fields returns the fields of the record whose first slot it is.
func (r *lineRing) fields(n uint32) *lineFields {
	return (*lineFields)(unsafe.Add(unsafe.Pointer(r), slotOff(n)+uintptr(n&1^1)*lineStampSize))
}

// payload returns the first size bytes of the payload of the record whose
// first slot it is: at most lineShort, or linePayload in a line's first
// slot.
func (r *lineRing) payload(n uint32, size int) []byte {
	off := slotOff(n) + lineStampSize + lineFieldsSize - uintptr(n&1)*lineStampSize
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(r), off)), size)
}

// lineRecordSlots is the slots of the record of a message of n bytes.
func lineRecordSlots(n int) uint32 {
	if n <= lineShort {
		return 1
	}
	return 2
}

// lineRecordAt is the running number of the first slot of the record of a
// message of n bytes whose turn comes at running number at: at, or, for a
// two-slot record whose turn comes in a line's second slot, the next
// line's first, the slot at holding its fields.
func lineRecordAt(at uint32, n int) uint32 {
	if n > lineShort {
		return at + at&1
	}
	return at
}

// lineSlotsAt is the slots that a message of n bytes takes from running
// number at on: its record's and the slot of its fields before it, if any.
func lineSlotsAt(at uint32, n int) uint32 {
	return lineRecordAt(at, n) - at + lineRecordSlots(n)
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

// postLine hands the record at running number at, its payload written,
// to the rank as the next message of the pair, of tag and n bytes; a
// two-slot record past the ring's next running number has its fields
// there too, in the second slot of the line before.
func (p *peer) postLine(at uint32, tag, n int) {
	r := p.lnOut
	f := r.fields(at)
	f.seq, f.tag, f.len = p.sendSeq, int32(tag), uint32(n)
	if n > lineShort {
		lineops.StoreRelease(r.stamp(at+1), at+2)
	}
	lineops.StoreRelease(r.stamp(at), at+1)
	if at != p.lnSent {
		// Stamped last: a receiver that finds these fields finds the
		// record whole, instead of reading its line early.
		*r.fields(p.lnSent) = *f
		lineops.StoreRelease(r.stamp(p.lnSent), p.lnSent+1)
	}
	p.sendSeq++
	p.lnSent = at + lineRecordSlots(n)
	if p.lnSent+linePrefetchAhead-p.lnFree < lineSlots {
		// Ask now for the line of a slot linePrefetchAhead ahead,
		// known free: the transfers of the next lines from the
		// receiver's core then overlap one another and this one, instead
		// of each waiting behind the previous store in the store buffer.
		lineops.PrefetchWrite(unsafe.Add(unsafe.Pointer(r), slotOff(p.lnSent+linePrefetchAhead)))
	}
	p.announce()
}

// inLine returns a private copy of the fields of the record that holds
// the rank's next message, and whether one does: the sender may rewrite
// them, so they are read once, here (trust.go).
func (p *peer) inLine() (lineFields, bool) {
	r, n := p.lnIn, p.lnRecv
	if r == nil {
		return lineFields{}, false
	}
	// stamp(n) and fields(n), from one slot address: the inliner's
	// budget, on every Poll's path, has no room for both calls.
	slot, odd := unsafe.Add(unsafe.Pointer(r), slotOff(n)), uintptr(n&1)
	if (*atomic.Uint32)(unsafe.Add(slot, odd*(lineSlotSize-lineStampSize))).Load() != n+1 {
		return lineFields{}, false
	}
	f := *(*lineFields)(unsafe.Add(slot, (odd^1)*lineStampSize))
	return f, f.seq == p.recvSeq
}

// takeLine delivers the message of record f, src's next, to the receive
// it matches or as unexpected.
func (ep *Endpoint) takeLine(src int, f lineFields) error {
	data, next, err := ep.openLine(src, f)
	if err != nil || data == nil {
		return err
	}
	err = ep.arrive(src, int(f.tag), kindMsg, len(data), data)
	ep.peers[src].closeLine(next)
	return err
}

// takeLineInto delivers the message of record f, the next from r's
// source, to r, which it matches and which no earlier receive precedes.
func (ep *Endpoint) takeLineInto(r *Request, f lineFields) error {
	data, next, err := ep.openLine(r.peer, f)
	if err != nil || data == nil {
		ep.finish(r, 0, cmp.Or(err, ep.peers[r.peer].dead))
		return err
	}
	ep.matched++
	r.tag, r.msgLen = int(f.tag), len(data)
	r.deliver(data)
	ep.peers[r.peer].closeLine(next)
	ep.finishRecv(r)
	return nil
}

// openLine checks record f, src's next message, and moves src's sequence
// past it; it returns the payload, which stays the sender's until
// closeLine, and the running number after the record. A record out of
// bounds fails src (nil data, nil error).
func (ep *Endpoint) openLine(src int, f lineFields) (data []byte, next uint32, err error) {
	p := &ep.peers[src]
	r := p.lnIn
	n := int(f.len)
	if f.len > linePayload {
		return nil, 0, ep.distrust(peerfault.OutOfBounds(src, "length of a line record", uint64(f.len), linePayload))
	}
	// A two-slot record's stamps were stored before the one found, so
	// they are not read; its payload stays in its line whatever they say.
	at := lineRecordAt(p.lnRecv, n)
	if p.asm.req != nil || p.asm.ux != nil {
		return nil, 0, ep.distrust(peerfault.Corrupt(src, "sequence of a line record", "message %d inside a multi-cell message", f.seq))
	}
	ep.arrived++
	p.recvSeq++
	return r.payload(at, n), at + lineRecordSlots(n), nil
}

// closeLine gives back to the sender the slots up to running number next:
// those of the record just delivered and of the slot its fields took before
// it, if any. It publishes the count of consumed slots each time it passes
// a multiple of lineRelease: the payload has been copied out.
func (p *peer) closeLine(next uint32) {
	p.released = p.recvSeq
	was := p.lnRecv
	p.lnRecv = next
	if next/lineRelease != was/lineRelease {
		// A release store: the payload was copied out before. An XCHG
		// would wait for the count's line to come back from the sender,
		// which reads it while the ring looks full.
		lineops.StoreRelease(&p.lnIn.done, next)
	}
}

// sendLine sends r, a whole message of at most linePayload bytes, through
// the pair's line ring if it has room, and reports whether it did.
func (ep *Endpoint) sendLine(p *peer, r *Request) bool {
	n := r.msgLen
	if !p.outLine(lineSlotsAt(p.lnSent, n)) {
		return false
	}
	at := lineRecordAt(p.lnSent, n)
	r.gatherAll(p.lnOut.payload(at, n))
	p.postLine(at, r.tag, n)
	r.seqd = true
	ep.stats.FastboxMsgs++
	ep.stats.LineMsgs++
	return true
}
