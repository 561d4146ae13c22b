package rma

// RingSlots is how many notifications an allocated window's ring holds.
const RingSlots = ringSlots

// ReserveNotification reserves, as this rank, the next slot of target's
// notification ring without publishing it: what an initiator killed in
// the middle of a PutNotify leaves behind. false: the ring is full.
func (w *Window) ReserveNotification(target int) bool {
	s, _ := w.rings[target].reserve(w.e.rank)
	return s != nil
}
