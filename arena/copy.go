package arena

import (
	"fmt"
	"unsafe"

	"github.com/knemesis/knemesis/lmt"
)

// The arena-copy backend carries a medium message from ordinary memory.
// Its sender copies the message into a slot of its own region of the
// arena and names the slot in the RTS; the receiver copies it out, as the
// arena backend copies out of a buffer the program allocated there. Two
// user copies and one packet each way, like an eager message sent through
// a single large cell, but with no system call (CMA's process_vm_readv
// pins pages and walks page tables for every message: the fixed cost that
// dominates from 4 to 64 KiB, docs/medium-messages.md) and no wait for the
// receiver: the send completes for its user at the next Progress (an
// lmt.Copier), and the receiver's DONE only gives the slot back.
//
// Slots are taken from the arena through lmt.Config.Alloc when none is
// free, once each, and then reused, the one freed last first, whose lines
// are still in this core's cache: in steady state a message allocates
// nothing. A message larger than a slot, or one that finds the arena full,
// is refused with an *lmt.Unavailable, and the caller sends it another way
// (attach falls back to its preference list).

// SlotSize is the largest message arena-copy carries: the top of the
// medium range, where one copy per side is no longer cheaper than a
// single-copy backend's system call.
const SlotSize = 256 << 10

// maxSlots bounds the slots one rank takes from its arena: as many sends
// in flight through arena-copy, before the next is refused.
const maxSlots = 64

func init() {
	lmt.Register(lmt.ArenaCopy, func(env *lmt.Env) (lmt.Backend, error) { return newCopy(env), nil }, probeCopy)
}

// copier is an arena backend (its receiver side is the same) whose sender
// copies into slots.
type copier struct {
	*backend
	free  [][]byte // free slots, full length; the last is reused first
	taken int      // slots taken from the arena in all
}

func newCopy(env *lmt.Env) *copier { return &copier{backend: newArena(env)} }

func probeCopy(cfg *lmt.Config, peer lmt.Peer) error {
	if err := check(cfg, peer.Rank); err != nil {
		return err
	}
	if cfg.Alloc == nil {
		return &lmt.Unavailable{Backend: lmt.ArenaCopy, Peer: -1,
			Reason: "the engine cannot allocate from the job's shared arena (no Config.Alloc)",
			Fix:    "attach the LMT with package attach, which gives it Endpoint.Alloc"}
	}
	return nil
}

func (c *copier) Check(peer lmt.Peer) error { return probeCopy(c.env.Config, peer) }

// Handle copies t's message into a slot, makes the slot t's buffer and
// names it as the arena backend names a buffer of the arena.
func (c *copier) Handle(t *lmt.Transfer, dst []byte) (int, error) {
	n := int(t.Len())
	if t.Len() > SlotSize {
		return 0, c.refuse(t, fmt.Sprintf("a message of %d bytes exceeds its %d-byte slots", n, SlotSize))
	}
	slot, err := c.take()
	if err != nil {
		return 0, c.refuse(t, err.Error())
	}
	t.UseCopy(slot[:t.Gather(slot[:n])])
	k, err := c.backend.Handle(t, dst)
	if err != nil {
		c.Release(t)
		return 0, err
	}
	return k, nil
}

func (c *copier) refuse(t *lmt.Transfer, reason string) error {
	return &lmt.Unavailable{Backend: lmt.ArenaCopy, Peer: t.Peer(), Reason: reason,
		Fix: "send it by another backend (attach does so by itself unless one is forced), or give the job a larger Options.ArenaSize"}
}

// take returns a free slot, taking a new one from the arena when none is.
func (c *copier) take() ([]byte, error) {
	if n := len(c.free); n > 0 {
		s := c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
		return s, nil
	}
	if c.taken == maxSlots {
		return nil, fmt.Errorf("all %d slots are in flight", maxSlots)
	}
	s, err := c.env.Config.Alloc(SlotSize)
	if err != nil {
		return nil, fmt.Errorf("no slot of %d bytes left in this rank's arena: %w", SlotSize, err)
	}
	c.taken++
	if cap(c.free) < maxSlots {
		// Room for every slot there will be: Release never grows it.
		c.free = append(make([][]byte, 0, maxSlots), c.free...)
	}
	return s[:SlotSize:SlotSize], nil
}

// Release implements lmt.Copier: the slot t was sent from is free again.
// The engine calls it once per transfer whose Handle succeeded, whose
// buffer is then the slot; the checks keep anything else out of the free
// list all the same.
func (c *copier) Release(t *lmt.Transfer) {
	b := t.Buffers()
	if len(b) != 1 || cap(b[0]) != SlotSize || len(c.free) == c.taken {
		return
	}
	own := c.env.Config.Arena(c.env.Rank)
	p, base := uintptr(unsafe.Pointer(unsafe.SliceData(b[0]))), uintptr(unsafe.Pointer(unsafe.SliceData(own)))
	if p >= base && p+SlotSize <= base+uintptr(len(own)) {
		c.free = append(c.free, b[0][:SlotSize])
	}
}
