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

// OnMapped has f see the descriptor of every window this process maps
// from now on, just before it maps it.
func OnMapped(f func(fd int)) { testHookMapped = f }
