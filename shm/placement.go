package shm

import "github.com/knemesis/knemesis/internal/memplace"

// place binds the ring to the receiver's node, as the receiver maps it:
// the receiver reads every entry and every piece from it. The sender's
// later populate allocates the slots under the policy set here.
func (r *ring) place() {
	r.placed = memplace.Place(r.mem).String()
}
