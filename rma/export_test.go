package rma

// RingSlots is how many notifications an allocated window's ring holds.
const RingSlots = ringSlots

// ReserveNotification takes, as this rank, the next position of target's
// notification ring and publishes nothing there: what an initiator
// killed in the middle of a PutNotify leaves behind. false: the ring is
// full.
func (w *Window) ReserveNotification(target int) bool {
	_, ok := w.rings[target].reserve()
	return ok
}
