package knem

import (
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Slot indexes the status array.
type Slot uint32

// StatusArray is the device's status array: one status byte per slot, in
// memory shared with the driver, which writes the outcome of asynchronous
// copies there. Alloc, Status and Free take no lock and make no system call,
// so a progress loop can poll many copies cheaply.
type StatusArray struct {
	mem  []byte
	used []atomic.Uint64 // allocation bitmap: bit set = slot in use
	next atomic.Uint32   // where Alloc starts looking, to spread slots
}

// MapStatus maps the status array of d with room for at least slots slots.
// The driver sizes the array from the mapping, rounded up to whole pages;
// Len says how many slots that gave. A context has one status array: a
// second MapStatus on the same Device fails with EBUSY.
func (d *Device) MapStatus(slots int) (*StatusArray, error) {
	page := unix.Getpagesize()
	if slots <= 0 || uint64(slots) > 1<<32 {
		return nil, &Error{Op: "mmap status array", Err: unix.EINVAL}
	}
	n := (slots + page - 1) / page * page
	mem, err := unix.Mmap(d.fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, &Error{Op: "mmap status array", Err: err}
	}
	return newStatusArray(mem), nil
}

func newStatusArray(mem []byte) *StatusArray {
	n := len(mem)
	s := &StatusArray{mem: mem, used: make([]atomic.Uint64, (n+63)/64)}
	if tail := n % 64; tail != 0 {
		s.used[len(s.used)-1].Store(^uint64(0) << tail) // slots that do not exist
	}
	return s
}

// Len is the number of slots.
func (s *StatusArray) Len() int { return len(s.mem) }

// Unmap releases the mapping. No copy may still be pending on it.
func (s *StatusArray) Unmap() error {
	if err := unix.Munmap(s.mem); err != nil {
		return &Error{Op: "munmap status array", Err: err}
	}
	s.mem = nil
	return nil
}

// Alloc reserves a free slot and sets it to StatusPending. It reports false
// when every slot is in use.
func (s *StatusArray) Alloc() (Slot, bool) {
	n := uint32(len(s.used))
	start := s.next.Load()
	for i := range n {
		wi := (start + i) % n
		w := &s.used[wi]
		for {
			old := w.Load()
			if old == ^uint64(0) {
				break
			}
			bit := uint32(bits.TrailingZeros64(^old))
			if w.CompareAndSwap(old, old|1<<bit) {
				slot := Slot(wi*64 + bit)
				s.next.Store(wi)
				s.set(slot, StatusPending)
				return slot, true
			}
		}
	}
	return 0, false
}

// ErrSlot is wrapped by the error of a StatusArray method given a slot
// past the end of the array (or any slot once it is unmapped).
var ErrSlot = errors.New("slot past the end of the status array")

// checkSlot refuses a slot the array does not have, instead of indexing
// past the mapping or the bitmap.
func (s *StatusArray) checkSlot(op string, slot Slot) error {
	if uint64(slot) >= uint64(len(s.mem)) {
		return &Error{Op: "StatusArray." + op, Err: fmt.Errorf("%w: slot %d, array of %d", ErrSlot, slot, len(s.mem))}
	}
	return nil
}

// Free returns a slot whose copy has completed.
func (s *StatusArray) Free(slot Slot) error {
	if err := s.checkSlot("Free", slot); err != nil {
		return err
	}
	s.used[slot/64].And(^(uint64(1) << (slot % 64)))
	return nil
}

// Status reads a slot.
func (s *StatusArray) Status(slot Slot) (Status, error) {
	if err := s.checkSlot("Status", slot); err != nil {
		return 0, err
	}
	return s.status(slot), nil
}

// Reset sets a slot back to StatusPending, to reuse it for another copy.
func (s *StatusArray) Reset(slot Slot) error {
	if err := s.checkSlot("Reset", slot); err != nil {
		return err
	}
	s.set(slot, StatusPending)
	return nil
}

// Wait polls slot until its copy completes or timeout passes, and returns
// the slot's status (StatusPending after a timeout). It spins briefly, then
// yields the processor between polls.
func (s *StatusArray) Wait(slot Slot, timeout time.Duration) (Status, error) {
	if err := s.checkSlot("Wait", slot); err != nil {
		return 0, err
	}
	for i := 0; i < 1000; i++ {
		if st := s.status(slot); st != StatusPending {
			return st, nil
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		if st := s.status(slot); st != StatusPending || time.Now().After(deadline) {
			return st, nil
		}
		time.Sleep(10 * time.Microsecond)
	}
}

// status reads a slot already checked.
func (s *StatusArray) status(slot Slot) Status {
	v := s.word(slot).Load()
	return Status((*[4]byte)(unsafe.Pointer(&v))[slot%4])
}

// word is the aligned 32-bit word holding slot's byte: Go has no atomic
// byte access, and the driver writes neighbouring bytes concurrently.
func (s *StatusArray) word(slot Slot) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&s.mem[slot&^3]))
}

func (s *StatusArray) set(slot Slot, st Status) {
	w := s.word(slot)
	for {
		old := w.Load()
		v := old
		(*[4]byte)(unsafe.Pointer(&v))[slot%4] = byte(st)
		if w.CompareAndSwap(old, v) {
			return
		}
	}
}
