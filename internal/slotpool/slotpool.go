// Package slotpool hands out fixed-size slots from a bounded pool in
// shared memory, claimed and released with lock-free bit operations, so
// that per-pair buffers can come from a per-process budget instead of
// being mapped for every pair.
//
// It serves the shm LMT (package shm): each rank's pool holds the slots of
// all the rings it writes, so that the memory of large-message transfers
// grows with the ranks, not with the pairs. There the sender alone claims
// and releases, and its receivers map the pool read-only; the pool itself
// does not require that.
//
// # Layout and contract
//
// A pool of n slots of size bytes occupies Size(n, size) bytes: a bitmap of
// n bits (1 = claimed) in whole cache lines, then the slots, each starting
// on a line. Memory that reads zero is a pool with every slot free, so a
// freshly created tmpfs file needs no initialisation. Any number of
// processes may map it and claim and release concurrently: Claim takes a
// clear bit with compare-and-swap, Release clears it with an atomic AND and
// reports a slot released twice (ErrNotClaimed) without changing anything.
// Whoever releases a slot must be done with its contents; whoever claims it
// next sees them as the last holder left them.
package slotpool

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

const lineSize = 64

// Errors of Release and New, tested with errors.Is.
var (
	ErrNotClaimed = errors.New("slotpool: slot released but not claimed")
	ErrRange      = errors.New("slotpool: slot number out of range")
	ErrGeometry   = errors.New("slotpool: bad pool geometry")
)

// Pool is one process's view of a pool. Its methods may be called from
// several goroutines and processes at once.
type Pool struct {
	words []atomic.Uint64
	slots unsafe.Pointer
	n     int
	size  int
	last  uint64 // valid bits of the last word
}

func bitmapBytes(n int) int { return ((n+63)/64*8 + lineSize - 1) &^ (lineSize - 1) }

// Size returns the bytes a pool of n slots of size bytes occupies.
func Size(n, size int) int { return bitmapBytes(n) + n*roundLine(size) }

func roundLine(size int) int { return (size + lineSize - 1) &^ (lineSize - 1) }

// New returns a view of the pool of n slots of size bytes that mem holds
// (at least Size(n, size) bytes, line-aligned, shared between the
// processes that use the pool).
func New(mem []byte, n, size int) (*Pool, error) {
	switch {
	case n < 1 || size < 1:
		return nil, fmt.Errorf("%w: %d slots of %d bytes", ErrGeometry, n, size)
	case len(mem) < Size(n, size):
		return nil, fmt.Errorf("%w: %d slots of %d bytes need %d bytes, the memory has %d", ErrGeometry, n, size, Size(n, size), len(mem))
	case uintptr(unsafe.Pointer(&mem[0]))%lineSize != 0:
		return nil, fmt.Errorf("%w: memory at %p is not line-aligned", ErrGeometry, &mem[0])
	}
	p := &Pool{
		words: unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&mem[0])), (n+63)/64),
		slots: unsafe.Pointer(&mem[bitmapBytes(n)]),
		n:     n,
		size:  size,
		last:  ^uint64(0) >> (63 - uint(n-1)%64),
	}
	return p, nil
}

// Len is the number of slots.
func (p *Pool) Len() int { return p.n }

// Claim takes a free slot and returns its number, or false when all are
// claimed.
func (p *Pool) Claim() (int, bool) {
	for i := range p.words {
		valid := ^uint64(0)
		if i == len(p.words)-1 {
			valid = p.last
		}
		w := &p.words[i]
		for {
			old := w.Load()
			free := ^old & valid
			if free == 0 {
				break
			}
			bit := uint64(1) << bits.TrailingZeros64(free)
			if w.CompareAndSwap(old, old|bit) {
				return 64*i + bits.TrailingZeros64(bit), true
			}
		}
	}
	return 0, false
}

// Release gives slot i back to the pool.
func (p *Pool) Release(i int) error {
	if i < 0 || i >= p.n {
		return fmt.Errorf("%w: slot %d of %d", ErrRange, i, p.n)
	}
	bit := uint64(1) << (i % 64)
	if p.words[i/64].And(^bit)&bit == 0 {
		return fmt.Errorf("%w: slot %d", ErrNotClaimed, i)
	}
	return nil
}

// Slot returns the memory of slot i (not checked: a slot number comes from
// Claim, or from a peer's message checked against Len).
func (p *Pool) Slot(i int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(p.slots, i*roundLine(p.size))), p.size)
}

// InUse counts the claimed slots (a snapshot).
func (p *Pool) InUse() int {
	n := 0
	for i := range p.words {
		n += bits.OnesCount64(p.words[i].Load())
	}
	return n
}
