package nemesis

// The arena's single copy: a message sent from buffers of this rank's
// shared arena to a rank of this node leaves as a descriptor, in the
// pair's sequence like any other message, and its receiver copies it
// once, straight out of the sender's buffer, then tells the sender by a
// store into a completion slot the sender polls. No LMT, no RTS/CTS/DONE,
// no system call:
//
//	sender                                   receiver
//	takes a free slot of its own page
//	descriptor (kindArena, sequenced) ─────▶ matched like any message
//	  gen, slot, [offset, length]...         checks every piece against
//	                                         the sender's region, copies
//	polls the slot while sends are   ◀────── stores gen into the slot
//	pending; the send completes              receive complete
//
// This is the window-based shared-memory transfer of Buntinas, Mercier
// and Gropp, "Design and Evaluation of Nemesis" (CCGRID 2006, §2.3): the
// region is mapped by every rank, named by offsets, never by addresses
// (§2.2), and the operation's completion is a word the initiator's side
// polls, here the sender's slot, set by the rank that copied.
//
// The descriptor goes through the fastbox or a cell and enters the same
// arrive path as an eager message, so ordering, AnySource and AnyTag,
// Probe, a late receive (the descriptor waits in the unexpected queue,
// the bytes in the sender's buffer), truncation and lists or datatypes on
// the receiving side are those of every message. It is untrusted: the
// receiver checks the slot, the generation, and each piece against the
// sender's region as mapped here before it reads a byte; a bad one fails
// the receive with ErrCorrupt, and the sender's send too when its slot
// field can be trusted that far (the slot then says "refused").
//
// Slots: each rank owns one page of them in the segment (arenaSlots
// lines, one slot a line, so that receivers completing different sends
// and the sender polling never share a line). Only the sender allocates
// them, from a bitmap in its own memory: no atomic read-modify-write, no
// shared bookkeeping a dead rank could leave half-written. A slot names
// the generation of the descriptor that armed it (a counter of this
// rank), so a late store for an earlier send never completes a later one,
// and sends complete in whatever order their receivers copy them. Poll
// reads the slots only while some are busy.
//
// Which messages go this way (viaArena then arenaPieces, the one place
// that decides): untyped sends to a rank of this node whose every
// non-empty buffer lies in this rank's arena, longer than a fastbox's
// payload, whose list fits a cell's descriptor, while a slot is free, and
// unless the LMT claims them (LMTArena: package attach does for a backend forced on the
// message or the endpoint). A message that fits a fastbox stays there:
// one short copy each side and the sender completes at once, where this
// path makes it wait for its receiver. The others take the path they
// took before: the LMT's arena backend (its RTS and DONE), or the cells.

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/lineops"
	"github.com/knemesis/knemesis/internal/memcopy"
	"github.com/knemesis/knemesis/peerfault"
)

// LMTArena is implemented by an LMT that takes some messages from arena
// buffers itself, rather than let the endpoint's single copy carry them
// (package attach does when a backend was forced, for the message or for
// the whole endpoint). The endpoint asks ArenaViaLMT for each send that
// would otherwise go by the single copy, before it leaves; true sends it
// to the LMT like any long message.
type LMTArena interface {
	ArenaViaLMT(r *Request) bool
}

const (
	// arenaSlots completion slots per rank, one line each: a page.
	arenaSlots     = 64
	arenaSlotBytes = arenaSlots * lineSize
	allSlotsBusy   = 1<<arenaSlots - 1
	// arenaRefused marks a slot whose descriptor its receiver refused
	// as corrupt; generations never reach it.
	arenaRefused = 1 << 63

	// A descriptor: gen (uint64), slot (uint32), pieces (uint32), then
	// per piece its offset in the sender's region and its length
	// (uint64 each). One piece takes 32 bytes: the line of a fastbox's
	// flag.
	arenaDescHdr   = 16
	arenaPieceSize = 16
)

var le = binary.LittleEndian

// arenaSends is the sender's side: the slots of its page that hold a
// pending send, and the send each holds.
type arenaSends struct {
	busy uint64 // bit i: slot i armed, its send pending
	gen  uint64 // generation of the last descriptor sent
	reqs [arenaSlots]*Request
	gens [arenaSlots]uint64
}

// slotWord is slot i of rank's page of completion slots, which lies
// before the arena's regions (arenaBytes).
func (s *segment) slotWord(rank, i int) *atomic.Uint64 {
	off := s.arenaOff - uint64(s.nprocs-rank)*arenaSlotBytes + uint64(i)*lineSize
	return (*atomic.Uint64)(unsafe.Add(s.base, off))
}

// viaArena reports whether send r goes by the arena, by this file's
// single copy or the LMT's arena backend: untyped, from this rank's
// arena, and longer than a fastbox carries. The crossover is the
// fastbox's payload because both sides of it are known: up to it, the
// fastbox's two short copies cost about what the descriptor, the copy
// and the slot do in software, and the sender completes at once instead
// of waiting for its receiver; past it, an eager message takes cells
// through both queues, and the single copy wins from there on
// (attach's BenchmarkInProcessEager against BenchmarkInProcessArena, and
// between two processes `lmtbench pingpong --backends eager,auto-arena`).
func (ep *Endpoint) viaArena(r *Request) bool {
	return ep.arena.mem != nil && r.typ == nil && r.msgLen > ep.seg.fboxPayload && ep.InArena(r.Iov())
}

// arenaPieces decides whether send r, which viaArena admitted, leaves as
// a descriptor, and returns its non-empty buffers (0: it does not).
func (ep *Endpoint) arenaPieces(r *Request) int {
	if ep.arenaOut.busy == allSlotsBusy || ep.lmtArena != nil && ep.lmtArena.ArenaViaLMT(r) {
		return 0
	}
	pieces := 1
	if r.vec {
		pieces = 0
		for _, b := range r.iov {
			if len(b) > 0 {
				pieces++
			}
		}
	}
	if arenaDescHdr+pieces*arenaPieceSize > ep.seg.payloadSize {
		return 0 // a list too long for a cell's descriptor: the LMT or the cells take it
	}
	return pieces
}

// sendArena sends r's descriptor, through the pair's fastbox when it is
// free, else a cell; ok is false when r does not go this way (see
// arenaPieces) and must take another.
func (ep *Endpoint) sendArena(r *Request) (res sendResult, ok bool, err error) {
	pieces := ep.arenaPieces(r)
	if pieces == 0 {
		return sendBlocked, false, nil
	}
	s := ep.seg
	p := &ep.peers[r.peer]
	n := arenaDescHdr + pieces*arenaPieceSize
	var fb *fboxHdr
	var pl []byte
	if n <= s.fboxPayload {
		fb, pl = p.outBox(&ep.stats)
		if fb == nil && p.fbOut[0] == nil {
			fb, pl = ep.claimOutBox(r.peer)
		}
	}
	var off uint64
	var c *cellHdr
	if fb == nil {
		if off, c, err = ep.freeQ.dequeue(s); err != nil {
			return sendBlocked, true, ep.fail(err)
		}
		if off == 0 {
			return sendBlocked, true, nil
		}
		pl = s.payload(off)
	}
	o := &ep.arenaOut
	slot := bits.TrailingZeros64(^o.busy)
	o.gen++
	ep.putArenaDesc(pl[:n], r, slot, o.gen)
	o.busy |= 1 << slot
	o.reqs[slot], o.gens[slot] = r, o.gen
	r.seqd = true
	ep.stats.ArenaSends++
	if fb != nil {
		p.postFbox(fb, kindArena, r.tag, n, r.msgLen)
		return sendHanded, true, nil
	}
	return sendHanded, true, ep.postCell(r.peer, off, c, kindArena, r.tag, n, uint64(r.msgLen))
}

// putArenaDesc writes the descriptor of r, armed on slot with gen, into
// d, which holds exactly its pieces.
func (ep *Endpoint) putArenaDesc(d []byte, r *Request, slot int, gen uint64) {
	le.PutUint64(d, gen)
	le.PutUint32(d[8:], uint32(slot))
	le.PutUint32(d[12:], uint32((len(d)-arenaDescHdr)/arenaPieceSize))
	at := arenaDescHdr
	for _, b := range r.Iov() {
		if len(b) == 0 {
			continue
		}
		le.PutUint64(d[at:], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))-ep.arena.base))
		le.PutUint64(d[at+8:], uint64(len(b)))
		at += arenaPieceSize
	}
}

// pollArenaSends completes the sends whose receivers have stored their
// generation into the slot (Poll calls it only while a slot is busy).
func (ep *Endpoint) pollArenaSends() {
	o := &ep.arenaOut
	for b := o.busy; b != 0; b &= b - 1 {
		i := bits.TrailingZeros64(b)
		switch v := ep.seg.slotWord(ep.rank, i).Load(); v {
		case o.gens[i]:
			ep.endArenaSend(i, nil)
		case o.gens[i] | arenaRefused:
			r := o.reqs[i]
			ep.endArenaSend(i, errorf(ErrCorrupt, "rank %d refused, as corrupt, the descriptor of this rank's %d-byte message with tag %d from its arena", r.peer, r.msgLen, r.tag))
		}
	}
}

// endArenaSend completes the send of slot i and frees the slot.
func (ep *Endpoint) endArenaSend(i int, err error) {
	o := &ep.arenaOut
	r := o.reqs[i]
	o.reqs[i] = nil
	o.busy &^= 1 << i
	n := r.msgLen
	if err != nil {
		n = 0
	}
	ep.finish(r, n, err)
}

// failArenaSends fails the sends whose receiver, rank, is gone, and frees
// their slots: it will never store into them.
func (ep *Endpoint) failArenaSends(rank int, err error) {
	o := &ep.arenaOut
	for b := o.busy; b != 0; b &= b - 1 {
		if i := bits.TrailingZeros64(b); o.reqs[i].peer == rank {
			ep.endArenaSend(i, err)
		}
	}
}

// recvArena completes receive r, matched with a descriptor d from r.peer:
// it checks d, copies the message out of the sender's region into r's
// buffer, list or type (what fits: nothing is written past it), and
// releases the sender.
func (ep *Endpoint) recvArena(r *Request, d []byte) error {
	src := r.peer
	slot, gen, pieces, err := ep.arenaDesc(src, r.msgLen, d)
	if err != nil {
		if slot >= 0 {
			ep.releaseArena(src, slot, gen|arenaRefused)
		}
		ep.finish(r, 0, err)
		return nil
	}
	region := ep.seg.region(src)
	for ; len(pieces) > 0 && r.n < r.room; pieces = pieces[arenaPieceSize:] {
		off, n := le.Uint64(pieces), le.Uint64(pieces[8:])
		if r.vec {
			r.scatter(region[off : off+n])
		} else {
			r.n += memcopy.Copy(r.buf[0][r.n:], region[off:off+n])
		}
	}
	ep.releaseArena(src, slot, gen)
	ep.stats.ArenaRecvs++
	ep.stats.ArenaBytes += uint64(r.n)
	ep.finishRecv(r)
	return nil
}

// releaseArena stores v into slot of rank src's page, after the copy,
// and wakes src if it dozes.
func (ep *Endpoint) releaseArena(src, slot int, v uint64) {
	lineops.StoreRelease64(ep.seg.slotWord(src, slot), v)
	ep.peers[src].wake()
}

// arenaDesc checks descriptor d of a total-byte message from rank src
// and returns its slot (-1 when even that cannot be trusted), its
// generation and its pieces. Every piece lies inside src's region as
// mapped here, and the pieces hold total bytes; anything else is an
// *peerfault.Error of kind ErrCorrupt that names the field.
func (ep *Endpoint) arenaDesc(src, total int, d []byte) (slot int, gen uint64, pieces []byte, err error) {
	region := ep.seg.region(src)
	if region == nil || ep.peers[src].net || len(d) < arenaDescHdr {
		return -1, 0, nil, peerfault.Corrupt(src, "arena descriptor", "%d bytes from a rank that shares no arena with this rank or sent less than a descriptor's %d-byte header", len(d), arenaDescHdr)
	}
	gen, s, count := le.Uint64(d), le.Uint32(d[8:]), le.Uint32(d[12:])
	if s >= arenaSlots || gen == 0 || gen&arenaRefused != 0 {
		return -1, 0, nil, peerfault.Corrupt(src, "slot of an arena descriptor", "names completion slot %d (of %d) and generation %#x", s, arenaSlots, gen)
	}
	slot, pieces = int(s), d[arenaDescHdr:]
	if uint64(len(pieces)) != uint64(count)*arenaPieceSize {
		return slot, gen, nil, peerfault.Corrupt(src, "piece count of an arena descriptor", "announces %d pieces in %d bytes", count, len(pieces))
	}
	size, sum := uint64(len(region)), uint64(0)
	for i := 0; i < len(pieces); i += arenaPieceSize {
		off, n := le.Uint64(pieces[i:]), le.Uint64(pieces[i+8:])
		if off > size || n > size-off {
			return slot, gen, nil, peerfault.Corrupt(src, "piece of an arena descriptor", "piece %d is %d bytes at offset %d, outside the rank's %d-byte region", i/arenaPieceSize, n, off, size)
		}
		sum += n
	}
	if sum != uint64(total) {
		return slot, gen, nil, peerfault.Corrupt(src, "length of an arena descriptor", "its pieces hold %d bytes of a %d-byte message", sum, total)
	}
	return slot, gen, pieces, nil
}
