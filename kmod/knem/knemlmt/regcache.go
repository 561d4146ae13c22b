package knemlmt

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem"
)

// regionCacheLen bounds the sender's cache: as many regions stay declared
// (and their pages pinned) between messages.
const regionCacheLen = 32

// regionCache is the sender's registration cache: a region declared for a
// message's buffers stays declared, keyed by the list of their addresses
// and lengths (one buffer or an iovec list), and the next message from
// the same list sends the same cookie instead of pinning the pages again
// (Open MPI's grdma and UCX's rcache do the same for their KNEM regions).
//
// An address may map other pages by the next message: munmap and mmap
// again, or Go's scavenger releasing a freed span with MADV_DONTNEED. A
// region keeps the pages it pinned, so a cache keyed by address could make
// the receiver read pages the sender no longer uses. Each cached region is
// therefore watched by the driver (knem.Device.CreateWatchedRegion): its
// status slot turns StatusFailed when its range changes (for a list, any
// change between its first and last byte), and a hit reads the slot,
// without a system call, before sending the cookie again. A failed region
// is destroyed and a new one declared in its place.
//
// A region is sent again only once the transfer that last sent it is over
// (the receiver may still be copying from it otherwise, and MPI lets two
// sends share a buffer); a list whose region is busy, and any message
// when every entry is busy, falls back to a single-use region. The least
// recently used idle entry makes room for a new list. Cached regions stay
// pinned: their pages count against the sender's RLIMIT_MEMLOCK, and each
// region against the driver's per-user region limit (max_user_regions).
// A region refused for either (ENOMEM, ENOSPC) makes the cache destroy
// idle entries, least recently used first, until they held as many pages
// (or one region), and try again. A region the receiver has attached
// keeps its pages, and their charge, until the receiver drops the
// attachment (attachCache): its eviction frees them later.
type regionCache struct {
	dev    *knem.Device
	status *knem.StatusArray
	ents   [regionCacheLen]cachedRegion
	clock  uint64
	// For the tests: regions declared, and entries destroyed to make
	// room under the driver's limits.
	creates, evictions int
}

type cachedRegion struct {
	key     uint64      // keyOf(the buffers)
	spans   []span      // the non-empty buffers; owned, reused by the next fill
	pages   int         // pinned by the region
	cookie  knem.Cookie // 0: empty
	slot    knem.Slot
	hasSlot bool
	used    uint64 // clock of the last use
	// The transfer that last sent the region, and its ID then (a Transfer
	// may be reused for another message).
	t  sending
	id uint64
}

// span is one non-empty buffer of a cached list.
type span struct {
	base uintptr
	n    int
}

func spanOf(b []byte) span {
	return span{uintptr(unsafe.Pointer(unsafe.SliceData(b))), len(b)}
}

// keyOf hashes the non-empty buffers of bufs (an FNV-1a step for each
// address and length word), in place. Empty buffers add no byte to a region, so
// two lists that differ only by them share it.
func keyOf(bufs [][]byte) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		s := spanOf(b)
		h = (h ^ uint64(s.base)) * 1099511628211
		h = (h ^ uint64(s.n)) * 1099511628211
	}
	return h
}

// holds reports whether e's region was declared for exactly bufs' list.
func (e *cachedRegion) holds(key uint64, bufs [][]byte) bool {
	if e.cookie == 0 || e.key != key {
		return false
	}
	i := 0
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		if i == len(e.spans) || e.spans[i] != spanOf(b) {
			return false
		}
		i++
	}
	return i == len(e.spans)
}

// record keeps bufs' list in e, reusing e's array.
func (e *cachedRegion) record(key uint64, bufs [][]byte) {
	e.key, e.spans, e.pages = key, e.spans[:0], 0
	for _, b := range bufs {
		if len(b) > 0 {
			e.spans = append(e.spans, spanOf(b))
			e.pages += pagesOf(spanOf(b))
		}
	}
}

// pagesOf is how many pages the driver pins (and charges) for s.
func pagesOf(s span) int {
	first := s.base &^ (pageSize - 1)
	end := (s.base + uintptr(s.n) + pageSize - 1) &^ (pageSize - 1)
	return int((end - first) / pageSize)
}

var pageSize = uintptr(unix.Getpagesize())

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

// get returns a cached region of bufs for t; false: declare a single-use
// region instead.
func (c *regionCache) get(t sending, bufs [][]byte) (knem.Cookie, bool) {
	key := keyOf(bufs)
	c.clock++
	var victim *cachedRegion
	for i := range c.ents {
		e := &c.ents[i]
		if e.holds(key, bufs) {
			if e.busy() {
				return 0, false
			}
			if st, err := c.status.Status(e.slot); err == nil && st == knem.StatusSuccess {
				e.use(t, c.clock)
				return e.cookie, true
			}
			return c.fill(e, t, key, bufs) // the range changed
		}
		if !e.busy() && (victim == nil || e.used < victim.used) {
			victim = e
		}
	}
	if victim == nil {
		return 0, false
	}
	return c.fill(victim, t, key, bufs)
}

// fill declares a watched region of bufs in e, dropping e's old one.
func (c *regionCache) fill(e *cachedRegion, t sending, key uint64, bufs [][]byte) (knem.Cookie, bool) {
	c.drop(e)
	if !e.hasSlot {
		if e.slot, e.hasSlot = c.status.Alloc(); !e.hasSlot {
			return 0, false
		}
	}
	e.record(key, bufs)
	cookie, err := c.create(e, bufs)
	if err != nil {
		return 0, false // the single-use path tries once more and reports it
	}
	c.creates++
	// A region made while the range changed starts failed: not reusable.
	if st, _ := c.status.Status(e.slot); st != knem.StatusSuccess {
		c.dev.DestroyRegion(cookie)
		return 0, false
	}
	e.cookie = cookie
	e.use(t, c.clock)
	return cookie, true
}

// create declares bufs as e's watched region. Refused for lack of
// pinnable memory (ENOMEM: over RLIMIT_MEMLOCK) or over the per-user
// region limit (ENOSPC), it evicts idle entries that held e's pages (or
// one region) and tries again, until it succeeds or none is left.
func (c *regionCache) create(e *cachedRegion, bufs [][]byte) (knem.Cookie, error) {
	for {
		cookie, err := c.dev.CreateWatchedRegion(bufs, knem.ProtRead, 0, e.slot)
		need := e.pages
		switch {
		case err == nil:
			return cookie, nil
		case errors.Is(err, unix.ENOSPC):
			need = 1
		case !errors.Is(err, unix.ENOMEM):
			return 0, err
		}
		if c.evict(need) == 0 {
			return 0, err
		}
	}
}

// evict destroys idle entries, least recently used first, until they held
// need pages or none is left, and says how many pages they held.
func (c *regionCache) evict(need int) (freed int) {
	for freed < need {
		var v *cachedRegion
		for i := range c.ents {
			e := &c.ents[i]
			if e.cookie != 0 && !e.busy() && (v == nil || e.used < v.used) {
				v = e
			}
		}
		if v == nil {
			break
		}
		freed += v.pages
		c.drop(v)
		c.evictions++
	}
	return freed
}

// drop destroys e's region, if any; e keeps its slot, and is the first
// to fill next.
func (c *regionCache) drop(e *cachedRegion) {
	if e.cookie != 0 {
		_ = c.dev.DestroyRegion(e.cookie)
	}
	e.cookie, e.t, e.used = 0, nil, 0
}

// shrink destroys the idle cached regions, returning their pages to
// RLIMIT_MEMLOCK, and says how many it dropped.
func (c *regionCache) shrink() int {
	n := 0
	for i := range c.ents {
		if e := &c.ents[i]; e.cookie != 0 && !e.busy() {
			c.drop(e)
			c.evictions++
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
