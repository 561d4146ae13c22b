package lmt

import (
	"encoding/binary"
	"fmt"
)

// The ring rail of a Split transfer: the pair's shared-memory ring as one
// more rail beside the receiver's read and the sender's write. The sender
// copies its piece of the message into the ring a slot at a time while the
// receiver copies the slots out, as the shm backend moves a whole message,
// and both go on with their CMA pieces between the slots. A ring piece
// costs two copies where a CMA piece costs one, and both CPUs, but it
// needs no ptrace right and no pinning, and where the CPUs copy faster
// than the kernel's CMA path walks and pins pages its measured speed wins
// it its share of the cut like any rail's (NewMadeleine's split over
// heterogeneous rails: Aumage, Brunet, Furmento, Namyst, CAC 2007).
//
// The sender offers the ring in its RTS (a word ahead of the offload
// rail's offer and the Split backend's handle); the receiver, when its own
// ring with the sender works and no other message of that sender holds
// it, opens it before its CTS and gives it the last piece of the cut. One
// message at a time holds a pair's ring: the receiver gives the next ring
// piece only once it has emptied the last one, which the sender had then
// filled, so the sender never fills two at once, and refuses a cut that
// says otherwise. An [Identity]'s Ring names the backend whose [Ringer]
// a Split backend takes; without it registered, or where it does not work
// (/dev/shm not writable), the backend runs on its other rails.
//
// Unwinding: whichever rail fails fails its side, whose failed DONE fails
// the other (flow_split.go). A transfer that leaves the engine still
// holding the ring failed, however it learnt it (its own rail, the peer's
// failed DONE, the peer's death, Close), and gives the ring up for good
// when it leaves ([Ringer].RingAbort, from Release): the ring may hold
// pieces no one will read, so the sender takes back its pool slots and
// the pair's later messages go on their other rails. Nothing of it stays
// pinned (the ring is plain shared memory) and its file leaves /dev/shm
// once both sides mapped it, or when the transfer fails before that.

// Ringer is implemented by a backend whose shared ring can also carry one
// piece of a Split message: the shm backend. An Engine calls it from its
// goroutine, with transfers of the Split backend that takes it (see
// [Identity].Ring), at most one per pair and direction at a time.
type Ringer interface {
	// RingOpen maps the ring t's piece goes through, on t's side: the
	// receiver's before its CTS, the sender's once the CTS gave it a
	// piece. An error leaves the ring unused.
	RingOpen(t *Transfer) error
	// RingPush, on the sender, copies into the ring up to max bytes of
	// p from its cursor and returns how many: 0 while the ring is full.
	RingPush(t *Transfer, p *RingPiece, max int) (int, error)
	// RingPull, on the receiver, copies out of the ring into p at its
	// cursor up to max bytes and returns how many: 0 while the ring is
	// empty. The peer wrote the ring: a value no RingPush writes is a
	// [*CorruptError].
	RingPull(t *Transfer, p *RingPiece, max int) (int, error)
	// RingAbort ends t's use of the ring, which failed on this side or
	// the other: the ring is not used again, and what it holds of this
	// side's comes back.
	RingAbort(t *Transfer)
}

// RingPiece is the ring rail's piece of a Split transfer, bytes [at, to)
// of the message still to move, with a cursor of its own in the
// transfer's buffers: the transfer's cursor runs over this side's CMA
// piece meanwhile. The transfer is not typed.
type RingPiece struct {
	t        *Transfer
	at, to   int64
	seg, off int // iov[seg][off:] holds byte at
}

// GatherAt copies into dst the piece's bytes from skip bytes past its
// cursor, without moving it, and returns how many.
func (p *RingPiece) GatherAt(dst []byte, skip int) int { return p.walk(dst, skip, true) }

// ScatterAt copies src into the piece's buffers from skip bytes past its
// cursor, without moving it, and returns how many.
func (p *RingPiece) ScatterAt(src []byte, skip int) int { return p.walk(src, skip, false) }

// Left returns how many bytes of the piece are still to move.
func (p *RingPiece) Left() int64 { return p.to - p.at }

func (p *RingPiece) walk(b []byte, skip int, out bool) int {
	n := int(min(int64(len(b)), p.to-p.at-int64(skip)))
	if n <= 0 {
		return 0
	}
	return walkIov(p.t.iov, p.seg, p.off, b[:n], skip, out)
}

// seek puts the cursor at byte from of t's message, the piece ending at to.
func (p *RingPiece) seek(t *Transfer, from, to int64) {
	*p = RingPiece{t: t, to: to}
	p.advance(int(from))
}

func (p *RingPiece) advance(n int) {
	p.at += int64(n)
	advanceIov(p.t.iov, &p.seg, &p.off, n)
}

// ringMin is the shortest message that gets a ring piece: one sixteenth
// of it (minShareDiv) is then 16 KiB, half a slot of the default ring;
// below, the slots' hand-over would cost more than the piece.
const ringMin = 256 << 10

// ringOfferLen is the room the ring's offer has in a Split RTS: a word, 1
// when the sender offers the ring, 0 when not.
const ringOfferLen = 8

// ringUse is how a side stands with the ring of one pair and direction.
type ringUse uint8

const (
	ringIdle   ringUse = iota
	ringHeld           // a transfer's piece goes through it
	ringBroken         // a transfer that held it failed: never used again
)

// ringed is a Split backend with a Ringer's rail beside its own (and its
// offload rail's, when it has one: Backend is then a railed).
type ringed struct {
	Backend
	ring Ringer
	slot *backendSlot // the Ringer's own, for its availability
	next Releaser     // the slot's releaser before the ring came, or nil
	// out and in are this side's use of the rail's ring to and from
	// each rank, by rank: a pair has one each way.
	out, in []ringUse
}

// withRing gives the Split backend of s the rail of the backend named by
// its identity's Ring, if this Engine has it and it is a Ringer.
func (e *Engine) withRing(s *backendSlot, name string) {
	o := e.slot(name)
	if o == nil || s.kind != Split {
		return
	}
	if rg, ok := o.b.(Ringer); ok {
		s.ringRail(rg, o, e.cfg.Size)
	}
}

// ringRail gives s the ring of rg, usable with the peers avail is.
func (s *backendSlot) ringRail(rg Ringer, avail *backendSlot, size int) {
	r := &ringed{Backend: s.b, ring: rg, slot: avail, next: s.releaser, out: make([]ringUse, size), in: make([]ringUse, size)}
	s.b, s.releaser = r, r
	s.offer += ringOfferLen
}

// uses returns this side's use of the ring with t's peer.
func (r *ringed) uses(t *Transfer) *ringUse {
	if t.side == Sender {
		return &r.out[t.peer]
	}
	return &r.in[t.peer]
}

// usable reports whether the ring may carry t's piece from here: a long
// enough message of plain buffers, the ring's backend working with the
// peer, and the ring not given up; the receiver also needs it free of
// other messages, the sender only by the time the CTS comes (Start).
func (r *ringed) usable(t *Transfer) bool {
	u := *r.uses(t)
	return t.length >= ringMin && !t.needsDatatypes() && (u == ringIdle || u == ringHeld && t.side == Sender) &&
		t.e.check(&r.slot.chans[t.peer]) == nil
}

// Handle writes, on the sender, the ring's offer ahead of the rest of the
// RTS handle; the receiver's CTS carries the Split backend's alone.
func (r *ringed) Handle(t *Transfer, dst []byte) (int, error) {
	if t.side == Receiver {
		return r.Backend.Handle(t, dst)
	}
	if len(dst) < ringOfferLen {
		return 0, fmt.Errorf("lmt: %s: RTS room of %d bytes, less than the %d of the ring rail's offer", t.ch.slot.name, len(dst), ringOfferLen)
	}
	offer := uint64(0)
	if r.usable(t) {
		offer = 1
		t.split.in |= 1 << RingRail
	}
	binary.LittleEndian.PutUint64(dst, offer)
	n, err := r.Backend.Handle(t, dst[ringOfferLen:])
	return ringOfferLen + n, err
}

// SetPeerHandle takes, on the receiver, the sender's offer, opening the
// ring when it takes it, and passes the rest on.
func (r *ringed) SetPeerHandle(t *Transfer, h []byte) error {
	if t.side == Sender {
		return r.Backend.SetPeerHandle(t, h)
	}
	if len(h) < ringOfferLen {
		return Corrupt(t.peer, "split RTS", "%d bytes of handle, shorter than its %d-byte ring offer", len(h), ringOfferLen)
	}
	offer := binary.LittleEndian.Uint64(h)
	if offer > 1 {
		return Corrupt(t.peer, "ring offer of a split RTS", "%d, neither 0 nor 1", offer)
	}
	// The ring is taken once the rest is: a receiver that falls back
	// to another backend leaves it free.
	if err := r.Backend.SetPeerHandle(t, h[ringOfferLen:]); err != nil {
		return err
	}
	if offer == 1 && r.usable(t) && r.ring.RingOpen(t) == nil {
		r.hold(t)
	}
	return nil
}

// hold gives t the pair's ring.
func (r *ringed) hold(t *Transfer) {
	*r.uses(t) = ringHeld
	t.split.ringHeld = true
	t.split.in |= 1 << RingRail
}

// Start puts the ring piece's cursor at its first byte: on the receiver
// once it cut, on the sender once the CTS said where, opening its side of
// the ring then. A ring piece while another message to the peer holds the
// ring is a corrupt cut (readBounds refuses one the sender did not offer).
func (r *ringed) Start(t *Transfer) error {
	from, to := t.split.bounds.piece(RingRail, t.length)
	sp := &t.split
	switch {
	case t.side == Receiver && from == to && sp.ringHeld:
		// The cut left out a ring it opened (no message that long
		// does): its file goes, and so does the ring.
		r.giveUp(t)
	case t.side == Sender && from < to && r.out[t.peer] != ringIdle:
		return Corrupt(t.peer, "cut of a split CTS", "a %d-byte piece for the %s rail, which another message to rank %d holds", to-from, RingRail, t.peer)
	case t.side == Sender && from < to:
		if err := r.ring.RingOpen(t); err != nil {
			return fmt.Errorf("lmt: the %s rail's piece [%d, %d) to rank %d: %w", RingRail, from, to, t.peer, err)
		}
		r.hold(t)
	}
	if from < to {
		sp.ring.seek(t, from, to)
	}
	return r.Backend.Start(t)
}

// letGo gives the ring back once t's piece is through it.
func (r *ringed) letGo(t *Transfer) {
	*r.uses(t) = ringIdle
	t.split.ringHeld = false
}

// Step moves this side's rail piece (the receiver's read and offload
// pieces through the Split backend, the sender's write) and, beside it, a
// slot's worth of the ring's piece per call; each side counts the ring's
// piece once its own is in and the ring's is through.
func (r *ringed) Step(t *Transfer, max int) (int, error) {
	sp := &t.split
	ringFrom, ringTo := sp.bounds.piece(RingRail, t.length)
	if ringFrom == ringTo {
		return r.Backend.Step(t, max)
	}
	if sp.ring.Left() > 0 {
		if err := r.move(t, ringFrom, ringTo); err != nil {
			return 0, err
		}
	}
	own, end := WriteRail, ringFrom
	if t.side == Receiver {
		own = ReadRail
		end, _ = sp.bounds.piece(WriteRail, t.length)
	}
	if t.moved < end {
		if sp.ring.Left() > 0 {
			max = min(max, pollChunk)
		}
		n, err := r.Backend.Step(t, int(min(int64(max), end-t.moved)))
		if n > 0 && t.moved+int64(n) == end && sp.railTook[own] == 0 {
			sp.railTook[own] = monotonic() - t.moveStart
		}
		return n, err
	}
	if sp.ring.Left() > 0 {
		return 0, nil
	}
	return int(ringTo - ringFrom), nil
}

// move copies the next slots of the ring's piece: into the ring on the
// sender, out of it on the receiver.
func (r *ringed) move(t *Transfer, from, to int64) error {
	p := &t.split.ring
	var n int
	var err error
	if t.side == Sender {
		n, err = r.ring.RingPush(t, p, pollChunk)
	} else {
		n, err = r.ring.RingPull(t, p, pollChunk)
	}
	if err != nil {
		return fmt.Errorf("lmt: the %s rail's piece [%d, %d) with rank %d: %w", RingRail, from, to, t.peer, err)
	}
	p.advance(n)
	if p.Left() == 0 {
		t.split.railTook[RingRail] = monotonic() - t.moveStart
		r.letGo(t)
	}
	return nil
}

// Release implements [Releaser]: a transfer that leaves the engine still
// holding the ring failed, on this side or the other (a failed DONE
// completes it without Abort), and gives the ring up.
func (r *ringed) Release(t *Transfer) {
	if r.next != nil {
		r.next.Release(t)
	}
	if t.split.ringHeld {
		r.giveUp(t)
	}
}

// giveUp ends t's use of the ring and the pair's: what it holds may be
// pieces no one will read.
func (r *ringed) giveUp(t *Transfer) {
	r.ring.RingAbort(t)
	*r.uses(t) = ringBroken
	t.split.ringHeld = false
}
