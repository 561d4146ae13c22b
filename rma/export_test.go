package rma

// RingSlots is how many notifications an allocated window's ring holds.
const RingSlots = ringSlots

// ReserveNotification takes, as this rank, the next position of target's
// notification ring, and stamps its slot when stamp is set, without
// publishing anything: what an initiator killed in the middle of a
// PutNotify leaves behind. false: the ring is full.
func (w *Window) ReserveNotification(target int, stamp bool) bool {
	r := &w.rings[target]
	t, ok := r.reserve()
	if ok && stamp && r.ready(t) {
		r.claim(t, w.e.rank)
	}
	return ok
}
