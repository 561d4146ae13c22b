package knemlmt

import (
	"unsafe"

	"github.com/knemesis/knemesis/kmod/knem"
)

// regionCacheLen bounds the sender's cache: as many regions stay declared
// (and their pages pinned) between messages.
const regionCacheLen = 32

// regionCache is the sender's registration cache: a region declared for a
// buffer stays declared, keyed by the buffer's address and length, and the
// next message from the same buffer sends the same cookie instead of
// pinning the pages again (Open MPI's grdma and UCX's rcache do the same
// for their KNEM regions).
//
// An address may map other pages by the next message: munmap and mmap
// again, or Go's scavenger releasing a freed span with MADV_DONTNEED. A
// region keeps the pages it pinned, so a cache keyed by address could make
// the receiver read pages the sender no longer uses. Each cached region is
// therefore watched by the driver (knem.Device.CreateWatchedRegion): its
// status slot turns StatusFailed when its range changes, and a hit reads
// the slot, without a system call, before sending the cookie again. A
// failed region is destroyed and a new one declared in its place.
//
// A region is sent again only once the transfer that last sent it is over
// (the receiver may still be copying from it otherwise, and MPI lets two
// sends share a buffer); a buffer whose region is busy, and any message
// when every entry is busy, falls back to a single-use region. The least
// recently used idle entry makes room for a new buffer. Cached regions
// stay pinned and count against RLIMIT_MEMLOCK: a region refused for
// that (ENOMEM) makes the sender drop the idle ones and try again.
type regionCache struct {
	dev     *knem.Device
	status  *knem.StatusArray
	ents    [regionCacheLen]cachedRegion
	clock   uint64
	creates int // regions declared, for the tests
}

type cachedRegion struct {
	base    uintptr
	n       int
	cookie  knem.Cookie // 0: empty
	slot    knem.Slot
	hasSlot bool
	used    uint64 // clock of the last use
	// The transfer that last sent the region, and its ID then (a Transfer
	// may be reused for another message).
	t  sending
	id uint64
}

// sending is what the cache asks of the transfer that sends a region
// (*lmt.Transfer).
type sending interface {
	ID() uint64
	Done() bool
	Err() error
}

// busy reports whether the last transfer to send e's region is still going.
func (e *cachedRegion) busy() bool {
	return e.t != nil && e.t.ID() == e.id && !e.t.Done() && e.t.Err() == nil
}

func (e *cachedRegion) use(t sending, clock uint64) {
	e.t, e.id, e.used = t, t.ID(), clock
}

// get returns a cached region of buf for t; false: declare a single-use
// region instead.
func (c *regionCache) get(t sending, buf []byte) (knem.Cookie, bool) {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	c.clock++
	var victim *cachedRegion
	for i := range c.ents {
		e := &c.ents[i]
		if e.cookie != 0 && e.base == base && e.n == len(buf) {
			if e.busy() {
				return 0, false
			}
			if st, err := c.status.Status(e.slot); err == nil && st == knem.StatusSuccess {
				e.use(t, c.clock)
				return e.cookie, true
			}
			return c.fill(e, t, buf, base) // the range changed
		}
		if !e.busy() && (victim == nil || e.used < victim.used) {
			victim = e
		}
	}
	if victim == nil {
		return 0, false
	}
	return c.fill(victim, t, buf, base)
}

// fill declares a watched region of buf in e, dropping e's old one.
func (c *regionCache) fill(e *cachedRegion, t sending, buf []byte, base uintptr) (knem.Cookie, bool) {
	c.drop(e)
	if !e.hasSlot {
		if e.slot, e.hasSlot = c.status.Alloc(); !e.hasSlot {
			return 0, false
		}
	}
	cookie, err := c.dev.CreateWatchedRegion([][]byte{buf}, knem.ProtRead, 0, e.slot)
	if err != nil {
		return 0, false // over RLIMIT_MEMLOCK, say: the single-use path reports it
	}
	c.creates++
	// A region made while the range changed starts failed: not reusable.
	if st, _ := c.status.Status(e.slot); st != knem.StatusSuccess {
		c.dev.DestroyRegion(cookie)
		return 0, false
	}
	e.base, e.n, e.cookie = base, len(buf), cookie
	e.use(t, c.clock)
	return cookie, true
}

// drop destroys e's region, if any; e keeps its slot.
func (c *regionCache) drop(e *cachedRegion) {
	if e.cookie != 0 {
		_ = c.dev.DestroyRegion(e.cookie)
	}
	e.cookie, e.t = 0, nil
}

// shrink destroys the idle cached regions, returning their pages to
// RLIMIT_MEMLOCK, and says how many it dropped.
func (c *regionCache) shrink() int {
	n := 0
	for i := range c.ents {
		if e := &c.ents[i]; e.cookie != 0 && !e.busy() {
			c.drop(e)
			n++
		}
	}
	return n
}

// close destroys every cached region and frees the slots.
func (c *regionCache) close() {
	for i := range c.ents {
		e := &c.ents[i]
		c.drop(e)
		if e.hasSlot {
			c.status.Free(e.slot)
			e.hasSlot = false
		}
	}
}

// len is how many regions the cache holds.
func (c *regionCache) len() int {
	n := 0
	for i := range c.ents {
		if c.ents[i].cookie != 0 {
			n++
		}
	}
	return n
}
