package nemesis

import "unsafe"

// queue is a handle on one lock-free multi-producer, single-consumer queue of
// Fig. 3 of Buntinas, Mercier and Gropp, "Design and Evaluation of Nemesis"
// (CCGRID 2006), whose elements are cells named by their segment offset (0
// is NULL: no cell lives in the header page).
type queue struct {
	sh *queueShared
}

// enqueue appends the cell at off (whose header is c). Any number of
// processes may enqueue concurrently with each other and with the dequeuer.
//
// The SWAP on the tail orders the enqueuers; the winner of an empty queue
// publishes the cell in head, any other links it behind the previous tail.
// Between the SWAP and that store the queue is momentarily unlinked; the
// dequeuer copes (see dequeue).
func (q queue) enqueue(s *segment, off uint64, c *cellHdr) error {
	// The cell is still private to this process: a plain store, made
	// visible by the SWAP, which is a full barrier.
	*(*uint64)(unsafe.Pointer(&c.next)) = 0
	prev := q.sh.tail.Swap(off)
	if prev == 0 {
		q.sh.head.Store(off)
		return nil
	}
	if !s.validCell(prev) {
		return s.badCell(prev)
	}
	(*cellHdr)(unsafe.Add(s.base, prev)).next.Store(off)
	return nil
}

// linkSpin bounds how long dequeue waits for an enqueuer that has swapped
// the tail but not yet linked its cell: a few hundred loads cover the two
// instructions that separate the SWAP from the store unless the enqueuer was
// descheduled, in which case returning "empty" lets the caller yield.
const linkSpin = 256

// dequeue removes the cell at the head and returns its offset and header, or
// 0 when the queue is empty or its head is not yet fully linked. Only one
// process (the queue's owner) may call it.
//
// The shadow head (§3.1) holds the dequeuer's position: the shared head is
// read and cleared only when the shadow is empty, so enqueuers (writing the
// tail, and next pointers) and the dequeuer do not share a line while the
// queue holds several cells.
func (q queue) dequeue(s *segment) (uint64, *cellHdr, error) {
	h := q.sh.shadow
	if h == 0 {
		h = q.sh.head.Load()
		if h == 0 {
			return 0, nil, nil
		}
		// Safe without a CAS, and even without an atomic store: an
		// enqueuer writes head only after its SWAP found the tail 0, which
		// cannot happen before this dequeuer's CAS has emptied the queue,
		// and that CAS orders this store before the enqueuer's.
		*(*uint64)(unsafe.Pointer(&q.sh.head)) = 0
		q.sh.shadow = h
	}
	if !s.validCell(h) {
		return 0, nil, s.badCell(h)
	}
	c := (*cellHdr)(unsafe.Add(s.base, h))
	next := c.next.Load()
	if next == 0 {
		next = q.waitLink(h, c)
		if next == notLinked {
			return 0, nil, nil
		}
	}
	q.sh.shadow = next
	return h, c, nil
}

// notLinked is waitLink's "not yet": no cell lives at this offset.
const notLinked = ^uint64(0)

// waitLink handles a head cell h without a successor: either it is the last
// cell (CAS the tail from h to empty: 0 is returned) or an enqueuer swapped
// the tail past h and is about to link its cell behind h; h then stays at
// the head until it has (notLinked is returned when that takes too long).
// Apart from dequeue so that its common path compiles straight.
func (q queue) waitLink(h uint64, c *cellHdr) uint64 {
	if q.sh.tail.CompareAndSwap(h, 0) {
		return 0
	}
	for range linkSpin {
		if next := c.next.Load(); next != 0 {
			return next
		}
	}
	return notLinked
}

// empty reports whether dequeue would find nothing (a racy hint).
func (q queue) empty() bool {
	return q.sh.shadow == 0 && q.sh.head.Load() == 0
}
