package shm

// The sender alone claims and releases the slots of its pool: it gives a
// slot back once the receiver's read counter has passed the ring entry
// that named it, so the receiver never writes to the pool (it maps it
// read-only) and a receiver that dies or scribbles over its counter cannot
// free a slot that is still in use elsewhere.

// claim takes a slot, leaving reserve of them free; when the pool looks
// empty it first collects what the receivers have read.
func (s *shm) claim(reserve int) (int, bool) {
	if s.held >= s.poolSlots-reserve {
		if s.reapAll(); s.held >= s.poolSlots-reserve {
			return 0, false
		}
	}
	slot, ok := s.own.slots.Claim()
	if ok {
		s.held++
	}
	return slot, ok
}

// placeFor returns where entry w of r puts its piece and the location word
// that says so: a claimed pool slot, or the ring's own slot when the
// receiver cannot map the pool.
func (s *shm) placeFor(r *ring, w uint64, reserve int, useRing bool) ([]byte, uint64, bool) {
	if useRing {
		off := int(w%s.slots) * s.slotSize
		return r.data[off : off+s.slotSize], inRing | w%s.slots, true
	}
	slot, ok := s.claim(reserve)
	if !ok {
		return nil, 0, false
	}
	return s.own.slots.Slot(slot), uint64(slot), true
}

// unplace gives back a place that placeFor returned and push did not use.
func (s *shm) unplace(loc uint64) {
	if loc&inRing == 0 {
		s.release(int(loc))
	}
}

func (s *shm) release(slot int) {
	// Only this side releases, from its own record: the pool refuses
	// a slot released twice, and held stays true to the bitmap.
	if s.own.slots.Release(slot) == nil {
		s.held--
	}
}

// reap releases the slots of r the receiver has read: entries [reaped,
// rd), where rd is the receiver's counter, already checked to be at most
// the ring's size behind ours. A counter moved back releases nothing.
func (s *shm) reap(r *ring, rd uint64) {
	if rd-r.reaped > r.mine-r.reaped {
		return
	}
	for ; r.reaped != rd; r.reaped++ {
		s.releaseEntry(r, r.reaped)
	}
}

func (s *shm) releaseEntry(r *ring, i uint64) {
	if slot := r.held[i%s.slots]; slot >= 0 {
		s.release(int(slot))
	}
}

// reclaim releases every slot r still holds: its receiver is gone, and
// the ring is not used again.
func (s *shm) reclaim(r *ring) {
	for ; r.reaped != r.mine; r.reaped++ {
		s.releaseEntry(r, r.reaped)
	}
	r.broken = true
}

// reapAll collects the slots every ring has had read and drops the rings
// that hold none from the busy list. (A dead receiver's slots come back
// through Abort: a buffered send stays with the engine until the DONE,
// and the receiver's death fails it.)
func (s *shm) reapAll() {
	busy := s.busy[:0]
	for _, r := range s.busy {
		if rd := r.read.Load(); r.mine-rd <= s.slots {
			s.reap(r, rd)
		}
		if r.reaped == r.mine {
			r.busy = false
			continue
		}
		busy = append(busy, r)
	}
	clear(s.busy[len(busy):])
	s.busy = busy
}
