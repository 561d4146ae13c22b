package knem

import "github.com/knemesis/knemesis/kmod/knem/internal/uapi"

// FeatureInvalidate says that CreateWatchedRegion works: the driver tells
// the creator of a region, through a status slot, that the region's
// address range may map other pages than the ones it pinned (a knemesis
// extension to KNEM ABI 0xd).
const FeatureInvalidate Features = uapi.FeatureInvalidate

// flagInvalidateStatus is only CreateWatchedRegion's: copies refuse it.
const flagInvalidateStatus Flags = uapi.FlagInvalidateStatus

// CreateWatchedRegion is CreateRegion for a registration cache that
// reuses a region for the next message from the same buffer. A region
// keeps the pages it pinned whatever the process does with their
// addresses: after munmap and mmap again, mremap, or MADV_DONTNEED (Go's
// scavenger returning a freed span) the buffer's addresses show new pages
// and the region the old ones. The driver therefore sets slot of d's
// status array to StatusSuccess now and to StatusFailed as soon as that
// may have happened; the cache reads the slot (StatusArray.Status, no
// system call) before each reuse and makes a new region when it failed.
// A protection change (mprotect) or a fork leaves the slot alone: the
// pages stay. The slot is the caller's until DestroyRegion.
//
// flags may hold FlagAnyUserAccess; single-use regions have nothing to
// watch (EINVAL). The driver refuses a slot past the array, or a Device
// without one, with EINVAL.
func (d *Device) CreateWatchedRegion(bufs [][]byte, prot Protection, flags Flags, slot Slot) (Cookie, error) {
	return d.createRegion(bufs, prot, flags|flagInvalidateStatus, slot)
}
