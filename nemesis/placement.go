package nemesis

import "github.com/knemesis/knemesis/internal/memplace"

// placeOwn binds this rank's region of the shared arena to its node: its
// owner writes the buffers, and a rank's own region is the one part of the
// segment it alone decides about. Cells and fastboxes are grouped by
// sender in the layout, so no page of them belongs to one receiver; they
// stay where the creator's fallocate put them.
func (ep *Endpoint) placeOwn() {
	ep.placement = memplace.Place(ep.seg.region(ep.rank))
}

// Placement says where this rank's arena region lives ("node 1", or why
// it was not placed, such as "1 node: nothing to place").
func (ep *Endpoint) Placement() string { return ep.placement.String() }
