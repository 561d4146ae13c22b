package arena

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/lmt"
)

// The arena-copy backend carries a medium message from ordinary memory.
// Its sender copies the message into a slot of its own region of the
// arena and names the slot in the RTS; the receiver copies it out, as the
// arena backend copies out of a buffer the program allocated there. Two
// user copies and one packet each way, like an eager message through the
// cells, but with no system call (CMA's process_vm_readv pins pages and
// walks page tables for every message: the fixed cost that dominates from
// 4 to 64 KiB, docs/medium-messages.md) and no wait for the receiver: the
// send completes for its user once the slot holds the message (an
// lmt.Copier), and the receiver's DONE only gives the slot back.
//
// The two copies overlap, as the cells' do: the sender copies a first
// piece before the RTS leaves and one piece a Progress after it, and
// publishes in the slot's header line how many bytes the slot holds; the
// receiver copies what the header says is there. The header is written by
// the sender and read by the receiver, who checks it (never past the
// message, never backwards) like every field a peer writes.
//
// Slots are taken from the arena through lmt.Config.Alloc when none is
// free, once each, up to a quarter of the region, and then reused, the one
// freed last first, whose lines are still in this core's cache: in steady
// state a message allocates nothing. A message larger than a slot, or one
// that finds every slot in flight, is refused with an *lmt.Unavailable,
// and the caller sends it another way (attach falls back to its
// preference list).
//
// The header is stored with an atomic store after the piece's bytes (on
// amd64 a locked instruction, after which every earlier store, the string
// copy's included, is visible) and loaded atomically before the copy out.

// SlotSize is the largest message arena-copy carries: the top of the
// medium range, where one copy per side is no longer cheaper than a
// single-copy backend's system call.
const SlotSize = lmt.ArenaCopyMax

// slotHeader is the line before a slot's data that holds how many bytes of
// the message the slot holds so far (little-endian uint64, stored
// atomically by the sender).
const slotHeader = 64

// piece is what the sender copies before the RTS, and then at each
// Progress: small enough that the receiver starts after a fraction of the
// message, large enough that a piece costs more than its publication.
const piece = 8 << 10

// maxSlots bounds the slots one rank takes from its arena: as many sends
// in flight through arena-copy, before the next is refused. They take at
// most a quarter of the rank's region besides (slotLimit), so that the
// program's own Alloc keeps the rest.
const maxSlots = 64

// slotLimit is how many slots arena-copy may take from a region of n bytes.
func slotLimit(n int) int { return min(maxSlots, n/4/(slotHeader+SlotSize)) }

func init() {
	lmt.Register(lmt.ArenaCopy, func(env *lmt.Env) (lmt.Backend, error) { return newCopy(env), nil }, probeCopy)
}

// copier is an arena backend whose sender copies into slots, and whose
// receiver copies what the slot holds so far.
type copier struct {
	*backend
	free  [][]byte // free slots, header included; the last is reused first
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
	if n := len(cfg.Arena(cfg.Rank)); slotLimit(n) == 0 {
		return &lmt.Unavailable{Backend: lmt.ArenaCopy, Peer: -1,
			Reason: fmt.Sprintf("a quarter of this rank's %d-byte arena holds no %d-byte slot", n, slotHeader+SlotSize),
			Fix:    fmt.Sprintf("give the job an Options.ArenaSize of at least %d", 4*(slotHeader+SlotSize))}
	}
	return nil
}

func (c *copier) Check(peer lmt.Peer) error { return probeCopy(c.env.Config, peer) }

// Handle takes a slot, empty, and names its data as the arena backend names
// a buffer of the arena; the engine has Fill copy the first piece before
// the RTS leaves.
func (c *copier) Handle(t *lmt.Transfer, dst []byte) (int, error) {
	if t.Len() > SlotSize {
		return 0, c.refuse(t, fmt.Sprintf("a message of %d bytes exceeds its %d-byte slots", t.Len(), SlotSize))
	}
	slot, err := c.take()
	if err != nil {
		return 0, c.refuse(t, err.Error())
	}
	t.SetCopy(slot[slotHeader : slotHeader+int(t.Len())])
	atomic.StoreUint64(filled(slot), 0) // the slot's last message said more
	k, err := lmt.EncodeSegments(t, c.pid, 0, dst)
	if err != nil {
		c.Release(t)
		return 0, err
	}
	own := c.env.Config.Arena(c.env.Rank)
	toOffsets(dst[:k], uint64(uintptr(unsafe.Pointer(unsafe.SliceData(own)))))
	return k, nil
}

func (c *copier) refuse(t *lmt.Transfer, reason string) error {
	return &lmt.Unavailable{Backend: lmt.ArenaCopy, Peer: t.Peer(), Reason: reason,
		Fix: "send it by another backend (attach does so by itself unless one is forced), or give the job a larger Options.ArenaSize"}
}

// filled is the header word of slot, the slot with its header.
func filled(slot []byte) *uint64 { return (*uint64)(unsafe.Pointer(&slot[0])) }

// slotOf returns the slot, header included, whose data is t's copy.
func slotOf(t *lmt.Transfer) []byte {
	data := t.Copy()
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(data)), -slotHeader)), slotHeader+SlotSize)
}

// Fill implements lmt.Copier: the next piece from t's cursor into its
// slot, then the header says the slot holds it.
func (c *copier) Fill(t *lmt.Transfer, max int) (int, error) {
	at := t.Moved()
	n := t.Gather(t.Copy()[at : at+int64(min(max, piece))])
	atomic.StoreUint64(filled(slotOf(t)), uint64(at)+uint64(n))
	return n, nil
}

// take returns a free slot, taking a new one from the arena when none is.
func (c *copier) take() ([]byte, error) {
	if n := len(c.free); n > 0 {
		s := c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
		return s, nil
	}
	if limit := slotLimit(len(c.env.Config.Arena(c.env.Rank))); c.taken >= limit {
		return nil, fmt.Errorf("all %d slots are in flight (at most %d, and a quarter of the arena)", limit, maxSlots)
	}
	s, err := c.env.Config.Alloc(slotHeader + SlotSize)
	if err != nil {
		return nil, fmt.Errorf("no slot of %d bytes left in this rank's arena: %w", slotHeader+SlotSize, err)
	}
	c.taken++
	if cap(c.free) < maxSlots {
		// Room for every slot there will be: Release never grows it.
		c.free = append(make([][]byte, 0, maxSlots), c.free...)
	}
	return s, nil
}

// Release implements lmt.Copier: the slot t was sent from is free again.
// The engine calls it once per transfer whose Handle succeeded; the checks
// keep anything else out of the free list all the same.
func (c *copier) Release(t *lmt.Transfer) {
	if t.Copy() == nil || len(c.free) == c.taken {
		return
	}
	slot := slotOf(t)
	own := c.env.Config.Arena(c.env.Rank)
	p, base := uintptr(unsafe.Pointer(unsafe.SliceData(slot))), uintptr(unsafe.Pointer(unsafe.SliceData(own)))
	if p >= base && p+uintptr(len(slot)) <= base+uintptr(len(own)) {
		c.free = append(c.free, slot)
	}
}

// SetPeerHandle reads the sender's handle as the arena backend does, and
// checks that it names one slot's data, past the header line the receiver
// reads.
func (c *copier) SetPeerHandle(t *lmt.Transfer, h []byte) error {
	if err := c.backend.SetPeerHandle(t, h); err != nil {
		return err
	}
	r := t.Remote()
	if len(r) == 0 && t.MessageLen() == 0 {
		return nil
	}
	if len(r) != 1 || r[0].Addr < slotHeader || r[0].Addr%8 != 0 {
		return lmt.Corrupt(t.Peer(), "arena-copy handle", "%d segments, the first at offset %d; want one, past a slot's %d-byte header, 8-byte aligned", len(r), firstAddr(r), slotHeader)
	}
	return nil
}

func firstAddr(r []lmt.Segment) uint64 {
	if len(r) == 0 {
		return 0
	}
	return r[0].Addr
}

// Step copies what the sender's slot holds beyond what this side has
// moved, up to max bytes.
func (c *copier) Step(t *lmt.Transfer, max int) (int, error) {
	region := c.env.Config.Arena(t.Peer())
	h := t.Remote()[0].Addr - slotHeader
	in := int64(atomic.LoadUint64((*uint64)(unsafe.Pointer(&region[h]))))
	switch {
	case in > t.MessageLen() || in < t.Moved():
		return 0, lmt.Corrupt(t.Peer(), "arena-copy slot header", "%d bytes in the slot, the message has %d, %d already copied out", in, t.MessageLen(), t.Moved())
	case in == t.Moved():
		return 0, nil // the sender is still copying the next piece
	}
	return c.backend.Step(t, int(min(int64(max), in-t.Moved())))
}
