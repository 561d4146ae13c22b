package rma

import (
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/lineops"
)

// The notifications of an allocated window do not travel as packets: the
// initiator deposits each one straight into the target's memory, as the
// Remote-Write API of Ben Fredj and Renault (2006) has the writer do, in a
// ring the target owns in the window's shared mapping. One ring per rank,
// written by every other rank, so the mapping grows with the job's size,
// not with its square.
//
// A ring is a bounded multi-producer, single-consumer queue in the manner
// of Vyukov's bounded MPMC queue: a tail counter that producers advance,
// and in each slot a stamp saying for which position, of which lap around
// the ring, the slot is free, being written, or published. The stamp also
// names the writer, so that a target whose head slot stays reserved can
// tell who reserved it: an initiator that died between reserving a slot
// and publishing it is named, its slot skipped, and the ring goes on.
//
// A producer reserves position t by a compare-and-swap of slot t's stamp
// from "free for t" to "reserved by me for t", then moves the tail past t
// (or finds that another producer did: every producer that sees slot t
// reserved helps the tail along, so one that dies there holds no one up).
// It writes the record and publishes it with a release store of the
// stamp: the put's data, copied before, is visible to whoever sees the
// stamp. A slot that still holds position t-ringSlots means the ring is
// full: the producer has reserved nothing and tries again later, with
// its operation queued in order behind nothing else toward that target.
//
// The consumer keeps its head to itself: it reads the head slot's stamp,
// takes the record when published, and stores "free for t+ringSlots".
// Producers never wait after reserving, so a slot stays reserved only for
// the few instructions of a record's writing, or for ever if its writer
// died there.
const (
	// ringSlots is the number of notifications a ring holds before its
	// writers wait for the target to take some (a power of two).
	ringSlots = 64
	// ringLine: the tail and every slot has a cache line of its own, so
	// that the producer writing one slot and the consumer reading the
	// previous one never share a line.
	ringLine = 64
	// ringLen is the bytes of one rank's ring in the mapping.
	ringLen = ringLine * (1 + ringSlots)
)

// A stamp is lap<<32 | state<<30 | writer's rank, so that a zeroed slot
// is free for the first lap.
const (
	stampReserved = 1 << 30
	stampPublish  = 2 << 30
	stampRank     = 1<<30 - 1 // the writer's rank; jobs are far smaller
	stampState    = 3 << 30
)

func stampFree(lap uint64) uint64 { return lap << 32 }

// ringTail is the counter producers advance, in a line of its own.
type ringTail struct {
	pos atomic.Uint64
	_   [ringLine - 8]byte
}

// ringSlot is one notification record and its stamp, one line.
type ringSlot struct {
	stamp  atomic.Uint64
	tag    uint64
	off, n uint64
	_      [ringLine - 32]byte
}

// noteRing is one rank's ring, in a shared mapping.
type noteRing struct {
	tail  *ringTail
	slots *[ringSlots]ringSlot
}

// ringAt is the ring of ringLen bytes at the start of mem, which must stay
// mapped as long as the ring is used.
func ringAt(mem []byte) noteRing {
	_ = mem[ringLen-1]
	p := unsafe.Pointer(unsafe.SliceData(mem))
	return noteRing{tail: (*ringTail)(p), slots: (*[ringSlots]ringSlot)(unsafe.Add(p, ringLine))}
}

// push publishes, as rank src, the notification of a put of n bytes at off
// with tag. false: the ring is full, nothing was written.
func (r noteRing) push(src int, tag, off, n int) bool {
	s, lap := r.reserve(src)
	if s == nil {
		return false
	}
	s.tag, s.off, s.n = uint64(tag), uint64(off), uint64(n)
	lineops.StoreRelease64(&s.stamp, lap<<32|stampPublish|uint64(src))
	return true
}

// reserve takes the ring's next position for src and returns its slot and
// lap, or nil when the ring is full.
func (r noteRing) reserve(src int) (*ringSlot, uint64) {
	for {
		t := r.tail.pos.Load()
		s, lap := &r.slots[t%ringSlots], t/ringSlots
		// Straight to the compare-and-swap: a load first would fetch
		// the line the consumer freed shared, then again to own it.
		if s.stamp.CompareAndSwap(stampFree(lap), lap<<32|stampReserved|uint64(src)) {
			r.tail.pos.CompareAndSwap(t, t+1)
			return s, lap
		}
		st := s.stamp.Load()
		switch {
		case st == stampFree(lap):
			// The consumer freed it in between: try again.
		case st>>32 == lap&(1<<32-1):
			// Another producer holds t and has not moved the
			// tail yet (or died before): help it along.
			r.tail.pos.CompareAndSwap(t, t+1)
		case r.tail.pos.Load() == t:
			// The slot still holds position t-ringSlots, not
			// taken yet: full.
			return nil, 0
		}
	}
}

// ringReader is the target's side of its own ring.
type ringReader struct {
	noteRing
	head uint64 // next position to take; the target's alone
}

// take removes the record at the head if it is published. Else writer is
// the rank that reserved the head slot and has not published it yet, or
// -1 when the ring is empty.
func (r *ringReader) take() (n Notification, writer int, ok bool) {
	s, lap := &r.slots[r.head%ringSlots], r.head/ringSlots
	st := s.stamp.Load()
	switch {
	case st>>32 != lap&(1<<32-1) || st&stampState == 0:
		return n, -1, false // free for this lap: nothing there yet
	case st&stampState != stampPublish:
		return n, int(st & stampRank), false
	}
	n = Notification{Source: int(st & stampRank), Tag: int(s.tag), Offset: int(s.off), Len: int(s.n)}
	r.free(s, lap)
	return n, -1, true
}

// skip gives back the head slot, reserved by a writer that will never
// publish it.
func (r *ringReader) skip() {
	r.free(&r.slots[r.head%ringSlots], r.head/ringSlots)
}

func (r *ringReader) free(s *ringSlot, lap uint64) {
	lineops.StoreRelease64(&s.stamp, stampFree(lap+1))
	r.head++
}
