package rma

import (
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/knemesis/knemesis/internal/lineops"
)

// The notifications of an allocated window do not travel as packets: the
// initiator deposits each one straight into the target's memory, as the
// Remote-Write API has the writer do (Ben Fredj and Renault, "The
// Critical's Path of Communication Model Analysis for a Performant
// Implementation of High-speed Interfaces over the Myrinet Interconnect",
// 2006), in a ring the target owns in the window's shared mapping. One ring per rank,
// written by every other rank, so the mapping grows with the job's size,
// not with its square.
//
// A ring is a bounded multi-producer, single-consumer queue: a tail that
// producers advance with a compare-and-swap, a head that the consumer
// alone advances, each in a line of its own, and slots whose stamp says
// for which lap around the ring a record was published, and by which
// rank. A producer takes position t by a compare-and-swap of the tail
// from t to t+1, after checking against the head it last read (read
// again only when the ring looks full) that slot t is free; it writes the
// put's data, then the record, and publishes it by a release store of the
// stamp. The consumer reads the stamp of its head slot, takes the record
// when published, and stores its new head.
//
// Every store to lines the other side reads is a plain store (a release
// store on x86 is one): the put's data line and the slot line travel
// together. The one locked instruction, the compare-and-swap, comes
// before a small put's data is written, since it would otherwise wait for
// the data line to arrive before it could go on; its line stays in the
// producer's cache while it is the only one writing to that target. The
// consumer never writes a slot, so the producer finds no line of it to
// take back first. A large put's data is written before the reservation,
// so that no position stays taken for the length of a copy and holds up
// the other producers' notifications behind it.
//
// A producer that finds the ring full takes nothing and tries again
// later, its operation queued in order; a position is taken only when its
// slot is free, and published at once.
//
// A producer that dies between taking a position and publishing it
// leaves a slot the consumer waits on for ever, with the tail past it.
// Nothing in the slot says who holds it, and the consumer must not skip
// it: its holder may be alive and descheduled, and would then write a
// slot given to another. So waits that find the ring held that way for a
// second while a rank is gone fail, naming the gone rank (ringnotify.go).
const (
	// ringSlots is the number of notifications a ring holds before its
	// writers wait for the target to take some (a power of two).
	ringSlots = 64
	// ringLine: the tail, the head and every slot have a cache line of
	// their own.
	ringLine = 64
	// ringLen is the bytes of one rank's ring in the mapping.
	ringLen = ringLine * (2 + ringSlots)
	// ringEarly: puts up to this size reserve their slot before their
	// data is written.
	ringEarly = 256
)

// A stamp is lap<<32 | published<<30 | writer's rank: a zeroed slot holds
// nothing for lap 0, and a slot stamped in an earlier lap nothing for this
// one.
const (
	stampPublish = 1 << 30
	stampRank    = 1<<30 - 1 // jobs are far smaller
)

// ringCounter is the tail or the head, in a line of its own. The head's
// line also holds waiting, which producers set when they find the ring
// full, and the consumer reads with its own head.
type ringCounter struct {
	pos     atomic.Uint64
	waiting atomic.Uint32
	_       [ringLine - 12]byte
}

// ringSlot is one notification record and its stamp, one line.
type ringSlot struct {
	stamp  atomic.Uint64
	tag    uint64
	off, n uint64
	_      [ringLine - 32]byte
}

// noteRing is a producer's view of one rank's ring, in a shared mapping.
type noteRing struct {
	tail, head *ringCounter
	slots      *[ringSlots]ringSlot
	seen       uint64 // the head as this producer last read it
}

// ringAt is the ring of ringLen bytes at the start of mem, which must stay
// mapped as long as the ring is used.
func ringAt(mem []byte) noteRing {
	_ = mem[ringLen-1]
	p := unsafe.Pointer(unsafe.SliceData(mem))
	return noteRing{
		tail:  (*ringCounter)(p),
		head:  (*ringCounter)(unsafe.Add(p, ringLine)),
		slots: (*[ringSlots]ringSlot)(unsafe.Add(p, 2*ringLine)),
	}
}

// reserve takes the ring's next position, whose slot the consumer has
// freed, or reports the ring full and takes nothing.
func (r *noteRing) reserve() (uint64, bool) {
	for {
		t := r.tail.pos.Load()
		if t-r.seen >= ringSlots {
			r.seen = r.head.pos.Load()
			if t-r.seen >= ringSlots {
				return 0, false
			}
		}
		if r.tail.pos.CompareAndSwap(t, t+1) {
			return t, true
		}
	}
}

// announce tells the consumer that a producer waits for room, so that
// its next take wakes the producer should it doze; the producer then
// looks again, since the consumer may have taken a record between its
// look and the announcement. The consumer's store of its head may pass
// its read of the announcement, as a fastbox's filler's read of the
// sleep word may pass its store: a producer lost in that race finds room
// when its doze ends.
func (r *noteRing) announce() {
	// A load first: a producer that retries at every poll must not
	// take the consumer's head line from it each time.
	if r.head.waiting.Load() == 0 {
		r.head.waiting.Store(1) // a full barrier: before the look again
	}
}

// publish writes, as rank src, the record of a put of n bytes at off with
// tag at position t, and hands it to the consumer.
func (r *noteRing) publish(t uint64, src, tag, off, n int) {
	s := &r.slots[t%ringSlots]
	s.tag, s.off, s.n = uint64(tag), uint64(off), uint64(n)
	lineops.StoreRelease64(&s.stamp, t/ringSlots<<32|stampPublish|uint64(src))
}

// ringReader is the target's side of its own ring.
type ringReader struct {
	noteRing
	pos uint64 // next position to take; the target's alone
	// stuckAt (position+1, 0 for none): where waits first found the
	// ring held by a producer while a rank was gone, at stuckSince.
	stuckAt    uint64
	stuckSince time.Time
}

// take removes the record at the head if it is published.
func (r *ringReader) take() (n Notification, ok bool) {
	s := &r.slots[r.pos%ringSlots]
	st := s.stamp.Load()
	if st>>32 != r.pos/ringSlots&(1<<32-1) || st&stampPublish == 0 {
		return n, false
	}
	n = Notification{Source: int(st & stampRank), Tag: int(s.tag), Offset: int(s.off), Len: int(s.n)}
	r.advance()
	return n, true
}

func (r *ringReader) advance() {
	r.pos++
	lineops.StoreRelease64(&r.head.pos, r.pos)
}

// waiters reports, once, whether producers announced that they wait for
// room since the last call.
func (r *ringReader) waiters() bool {
	return r.head.waiting.Load() != 0 && r.head.waiting.Swap(0) != 0
}

// held reports whether a producer has taken the head position and not
// published it yet.
func (r *ringReader) held() bool { return r.tail.pos.Load() > r.pos }
