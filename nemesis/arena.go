package nemesis

// The shared arena: buffers a program allocates with Endpoint.Alloc (as
// MPI programs do with MPI_Alloc_mem) come out of a region of the job's
// segment, which every rank maps. A receiver can then copy a message
// straight out of its sender's buffer with one user-space copy and no
// system call, what lmtbench's memcpy reference does and what CMA and
// KNEM do minus the system call, the pinning and the page-table walk.
//
// Each rank owns one region of Options.ArenaSize bytes and is the only
// one that allocates in it, so the allocator's bookkeeping is private to
// the rank (no shared metadata a crashed peer could leave half-written)
// and needs no lock. Peers only read a region, at offsets a descriptor
// (arenasend.go) or the LMT arena backend's RTS (package arena) names,
// each checked against the region's bounds by the reader before it reads.
// The one place a peer writes is the rank's page of completion slots,
// beside the regions: a receiver stores there the generation of the send
// it has copied, at a slot the descriptor names and the receiver checks.
//
// The arena is part of the segment: rank 0 checks the whole of it against
// the free space of the segment's directory and reserves it with
// fallocate(2) (space.go), so that a /dev/shm too small for it fails Join
// with a SpaceError naming the arena's share, never a SIGBUS later; and it
// goes when the last rank unmaps the segment, however the job ends.

import (
	"errors"
	"sort"
	"strconv"
	"unsafe"
)

// Errors of Alloc and Free, to be tested with errors.Is; the returned error
// says which buffer and what to do.
var (
	ErrNoArena       = errors.New("nemesis: the job has no shared arena")
	ErrArenaFull     = errors.New("nemesis: shared arena exhausted")
	ErrForeignBuffer = errors.New("nemesis: buffer not allocated from this rank's shared arena")
	ErrDoubleFree    = errors.New("nemesis: arena buffer already free")
)

const (
	arenaPage = 4096
	// maxArenaSize bounds one rank's region: the job's arena stays a
	// bounded part of /dev/shm.
	maxArenaSize = 1 << 34
	// arenaAlign is where blocks start: on a cache line, so that the
	// receiver copying one block never shares a line with the sender
	// writing the next.
	arenaAlign = 64
)

// arenaPages rounds a requested per-rank arena up to whole pages (a
// negative request is left for layout.check to refuse).
func arenaPages(n int) int {
	if n <= 0 || n > maxArenaSize {
		return n
	}
	return (n + arenaPage - 1) &^ (arenaPage - 1)
}

// arenaOffset is where the regions start in the segment: past the cells
// and the completion slots (arenasend.go), on a page.
func (l layout) arenaOffset() uint64 {
	_, _, _, _, size := l.offsets()
	return size - uint64(l.nprocs)*uint64(l.arenaSize)
}

// arenaBytes is the arena's part of the segment: each rank's region and
// its page of completion slots; nothing when the job has no arena.
func (l layout) arenaBytes() uint64 {
	if l.arenaSize == 0 {
		return 0
	}
	return uint64(l.nprocs) * (uint64(l.arenaSize) + arenaSlotBytes)
}

// arena is this rank's allocator over its own region.
type arena struct {
	mem   []byte
	base  uintptr
	free  []extent    // free space, by offset, neighbours merged
	live  map[int]int // offset of each allocated block → its rounded length
	inUse int
}

type extent struct{ off, n int }

func (a *arena) init(mem []byte) {
	a.mem = mem
	if len(mem) > 0 {
		a.base = uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
		a.free = []extent{{0, len(mem)}}
		a.live = make(map[int]int)
	}
}

// region returns rank's region of the arena as this process maps it, nil
// when the job has no arena.
func (s *segment) region(rank int) []byte {
	if s.arenaSize == 0 {
		return nil
	}
	off := s.arenaOff + uint64(rank)*uint64(s.arenaSize)
	return s.mem[off : off+uint64(s.arenaSize) : off+uint64(s.arenaSize)]
}

// Alloc returns n bytes of this rank's shared arena (like MPI_Alloc_mem).
// A message sent from such buffers to a rank of this node, of more than a
// fastbox's payload, leaves as a descriptor, and its receiver copies it
// once, straight from these buffers, with no rendezvous and no system
// call (arenasend.go). The buffer is valid until Free or Close; it must
// not be written or freed while a send from it is pending.
func (ep *Endpoint) Alloc(n int) ([]byte, error) {
	a := &ep.arena
	switch {
	case ep.closed:
		return nil, ErrClosed
	case a.mem == nil:
		return nil, errorf(ErrNoArena, "Alloc of %d bytes: Options.ArenaSize was 0 at Join; give the job an arena to allocate from", n)
	case n <= 0:
		return nil, errorf(ErrInvalidArg, "Alloc of %d bytes, want more than 0", n)
	}
	need := (n + arenaAlign - 1) &^ (arenaAlign - 1)
	for i, e := range a.free {
		if e.n < need {
			continue
		}
		if e.n == need {
			a.free = append(a.free[:i], a.free[i+1:]...)
		} else {
			a.free[i] = extent{e.off + need, e.n - need}
		}
		a.live[e.off] = need
		a.inUse += need
		return a.mem[e.off : e.off+n : e.off+n], nil
	}
	return nil, errorf(ErrArenaFull, "Alloc of %d bytes: %d of this rank's %d bytes in use, largest free block %d; Free buffers or raise Options.ArenaSize",
		n, a.inUse, len(a.mem), a.largest())
}

func (a *arena) largest() int {
	m := 0
	for _, e := range a.free {
		m = max(m, e.n)
	}
	return m
}

// Free gives back a buffer Alloc returned. A buffer from anywhere else, or
// one already freed, is refused with an error naming it, and the arena is
// left as it was.
func (ep *Endpoint) Free(b []byte) error {
	a := &ep.arena
	if ep.closed {
		return ErrClosed
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if a.mem == nil || p < a.base || p >= a.base+uintptr(len(a.mem)) {
		return errorf(ErrForeignBuffer, "Free of %d bytes at %#x: %s", len(b), p, ep.whereIs(p))
	}
	off := int(p - a.base)
	n, ok := a.live[off]
	if !ok {
		if start, inside := a.blockHolding(off); inside {
			return errorf(ErrInvalidArg, "Free of a buffer %d bytes into the arena block at offset %d: free the slice Alloc returned", off-start, start)
		}
		return errorf(ErrDoubleFree, "Free of the buffer at arena offset %d, which is free: freed twice, or never returned by Alloc", off)
	}
	delete(a.live, off)
	a.inUse -= n
	a.release(extent{off, n})
	return nil
}

// whereIs says whose memory p is, for an error message.
func (ep *Endpoint) whereIs(p uintptr) string {
	for r := range ep.size {
		reg := ep.seg.region(r)
		if b := uintptr(unsafe.Pointer(unsafe.SliceData(reg))); reg != nil && p >= b && p < b+uintptr(len(reg)) {
			return "it lies in the arena of rank " + strconv.Itoa(r) + ", which only that rank may free"
		}
	}
	if ep.arena.mem == nil {
		return "this job has no shared arena (Options.ArenaSize was 0)"
	}
	return "it is not in the shared arena; free it the way it was allocated"
}

// blockHolding finds the live block that holds offset off, if any.
func (a *arena) blockHolding(off int) (int, bool) {
	for start, n := range a.live {
		if off > start && off < start+n {
			return start, true
		}
	}
	return 0, false
}

// release puts e back into the free list, merged with its neighbours.
func (a *arena) release(e extent) {
	i := sort.Search(len(a.free), func(i int) bool { return a.free[i].off > e.off })
	if i > 0 && a.free[i-1].off+a.free[i-1].n == e.off {
		i--
		a.free[i].n += e.n
	} else {
		a.free = append(a.free, extent{})
		copy(a.free[i+1:], a.free[i:])
		a.free[i] = e
	}
	if i+1 < len(a.free) && a.free[i].off+a.free[i].n == a.free[i+1].off {
		a.free[i].n += a.free[i+1].n
		a.free = append(a.free[:i+1], a.free[i+2:]...)
	}
}

// ArenaRegion returns rank's region of the job's shared arena as this
// process maps it (nil when the job has none): what a receiver copies
// from, at the offsets its sender's descriptor or RTS names. It stays mapped until
// Close, whatever becomes of rank.
func (ep *Endpoint) ArenaRegion(rank int) []byte {
	if ep.closed || rank < 0 || rank >= ep.size {
		return nil
	}
	return ep.seg.region(rank)
}

// InArena reports whether every non-empty buffer of iov lies in this
// rank's region of the arena: a comparison of addresses, no lookup.
func (ep *Endpoint) InArena(iov [][]byte) bool {
	a := &ep.arena
	if a.mem == nil {
		return false
	}
	end := a.base + uintptr(len(a.mem))
	for _, b := range iov {
		if len(b) == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if p < a.base || p+uintptr(len(b)) > end {
			return false
		}
	}
	return true
}
