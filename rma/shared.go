package rma

import (
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/memcopy"
)

// part returns the memory of target's part this rank can reach directly:
// the mapping of an allocated window, an attached knem region, or its own
// exposed memory.
func (w *Window) part(target int) []byte { return w.parts[target] }

// copyLocal moves op's data with one user-space copy per list entry, in
// the shared mapping (or this rank's own memory).
func (w *Window) copyLocal(op *Op) {
	mem := w.part(op.target)[op.off : op.off+op.n]
	pos := 0
	for _, b := range op.iov {
		if op.kind == opPut {
			pos += memcopy.Copy(mem[pos:], b)
		} else {
			pos += memcopy.Copy(b, mem[pos:])
		}
	}
	op.moved = op.n
}

// word is the 64-bit word at off of mem, 8-byte aligned (checked by the
// caller).
func word(mem []byte, off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&mem[off]))
}

// apply runs an atomic on mem: CAS when cas, else fetch-and-add. It
// returns the word's previous value.
func apply(mem []byte, off int, cas bool, operand, compare uint64) uint64 {
	p := word(mem, off)
	if !cas {
		return p.Add(operand) - operand
	}
	for {
		old := p.Load()
		if old != compare || p.CompareAndSwap(old, operand) {
			return old
		}
	}
}

// stepAtomic runs op on the CPU where this rank maps the word, else asks
// the target to.
func (w *Window) stepAtomic(op *Op) (bool, error) {
	if !w.atomicByAM(op.target) {
		op.value = apply(w.part(op.target), op.off, op.cas, op.operand, op.compare)
		return false, nil
	}
	var flags uint8
	if op.cas {
		flags = flagCAS
	}
	h := header{typ: pktAtomic, flags: flags, win: w.id, off: uint64(op.off), a: op.operand, b: op.compare}
	ok, err := w.e.send(op.target, &h, nil)
	return !ok && err == nil, err
}
