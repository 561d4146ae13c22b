package lmt

import "fmt"

// The offload rail of a Split transfer: a third copier beside the
// receiver's read and the sender's write. The sender declares its buffers
// to an [Offloader] (the knem module) before the RTS and the RTS carries
// the declaration ahead of the Split backend's handle; the receiver, when
// its own Offloader works, cuts the message over three rails ([KnemRail]
// too) and, once its CTS is out, has the Offloader copy its piece
// asynchronously while it reads its own, polling the copy between the
// chunks of the read rail. An [Identity]'s Offload names the backend whose
// Offloader a Split backend takes; without it registered, or where it does
// not work (no /dev/knem), the backend runs on its two rails.
//
// Unwinding: whichever rail fails fails its side, whose failed DONE fails
// the other (flow_split.go). A receiver whose offload copy still runs when
// its transfer fails does not complete until the copy is over (railed is
// a [Quiescer]): the kernel still writes into its buffers, with their
// pages pinned, until then. The sender's declaration is withdrawn when its
// transfer leaves the engine however it ended (railed is a [Releaser]);
// a copy in flight keeps the pages it reads until it ends.

// Offloader is implemented by a backend that can also carry one piece of a
// Split message as a rail of its own: the knem backend, whose module
// copies out of the region the sender declared, on its kernel thread or a
// DMA channel. An Engine calls it from its goroutine, with transfers of
// the Split backend that takes it (see [Identity].Offload); it keeps what
// it needs of a transfer in [Transfer.Offload].
type Offloader interface {
	// Offer, on the sender, declares t's buffers and writes into dst
	// (OfferLen bytes) what the receiver needs to copy from them. false:
	// t cannot go that way (nothing declared, dst untouched).
	Offer(t *Transfer, dst []byte) (bool, error)
	// Accept, on the receiver, takes what the sender's Offer wrote. The
	// peer wrote it: a value no Offer writes is a [*CorruptError].
	Accept(t *Transfer, offer []byte) error
	// Copy, on the receiver, starts copying bytes [from, from+n) of the
	// message into t's buffers for them ([Transfer.BuffersAt]) and
	// returns without waiting: until Poll says the copy is over, they may
	// still be written.
	Copy(t *Transfer, from, n int64) error
	// Poll reports whether the copy Copy started is over, and its error.
	// Once it is, the rail holds nothing of t's receiver any more.
	Poll(t *Transfer) (bool, error)
	// Withdraw, on the sender, ends what Offer declared, once t leaves
	// the Engine however it ended; used says that the receiver's copy
	// took the declaration (a single-use one is gone then).
	Withdraw(t *Transfer, used bool)
}

// OfferLen is the room an Offloader's offer has in a Split RTS.
const OfferLen = 16

// OffloadState is what an [Offloader] keeps of one transfer, in the
// transfer, so that a message allocates and looks up nothing: the
// sender's declaration (a knem cookie, and whether it outlives the
// transfer, cached) and the receiver's copy in flight (a status slot).
type OffloadState struct {
	Key    uint64
	Kept   bool
	Flight uint64
}

// Offload returns t's [OffloadState].
func (t *Transfer) Offload() *OffloadState { return &t.split.off }

// pollChunk bounds a read-rail Step while the offload copy runs: the
// receiver polls the copy between Steps, and the time it sees the copy
// end is the offload rail's measure; a read-rail call of up to 256 KiB
// lets that be late by some tens of microseconds, not a whole piece.
const pollChunk = 256 << 10

// railed is a Split backend with an Offloader's rail beside its own. Its
// Step drives the receiver's two rails; every other call goes to the
// Split backend, with the offer ahead of its handle in the RTS.
type railed struct {
	Backend
	off  Offloader
	slot *backendSlot // the Offloader's own, for its availability
}

// withOffload gives the Split backend of s the rail of the backend named
// by its identity's Offload, if this Engine has it and it is an Offloader.
func (e *Engine) withOffload(s *backendSlot, name string) {
	o := e.slot(name)
	if o == nil || s.kind != Split {
		return
	}
	if off, ok := o.b.(Offloader); ok {
		s.offload(off, o)
	}
}

// offload gives s the rail of off, usable with the peers avail is.
func (s *backendSlot) offload(off Offloader, avail *backendSlot) {
	r := &railed{Backend: s.b, off: off, slot: avail}
	s.b, s.releaser, s.quiescer, s.offer = r, r, r, OfferLen
}

// usable reports whether the offload rail works with t's peer from here.
func (r *railed) usable(t *Transfer) bool {
	return t.e.check(&r.slot.chans[t.peer]) == nil
}

// Handle writes, on the sender, the offer ahead of the Split backend's
// handle (zeros when the rail is not offered); the receiver's CTS carries
// the Split backend's handle alone.
func (r *railed) Handle(t *Transfer, dst []byte) (int, error) {
	if t.side == Receiver {
		return r.Backend.Handle(t, dst)
	}
	if len(dst) < OfferLen {
		return 0, fmt.Errorf("lmt: %s: RTS room of %d bytes, less than the %d of the offload rail's offer", t.ch.slot.name, len(dst), OfferLen)
	}
	clear(dst[:OfferLen])
	if t.length >= offloadMin && !t.needsDatatypes() && r.usable(t) {
		ok, err := r.off.Offer(t, dst[:OfferLen])
		if err != nil {
			return 0, err
		}
		if ok {
			t.split.in |= 1 << KnemRail
		}
	}
	n, err := r.Backend.Handle(t, dst[OfferLen:])
	if err != nil && t.split.in.has(KnemRail) {
		r.off.Withdraw(t, false) // StartSend drops t: no release will
	}
	return OfferLen + n, err
}

// SetPeerHandle takes, on the receiver, the sender's offer (when its own
// rail works) and passes the rest to the Split backend.
func (r *railed) SetPeerHandle(t *Transfer, h []byte) error {
	if t.side == Sender {
		return r.Backend.SetPeerHandle(t, h)
	}
	if len(h) < OfferLen {
		return Corrupt(t.peer, "split RTS", "%d bytes of handle, shorter than its %d-byte offer", len(h), OfferLen)
	}
	if offer := h[:OfferLen]; !allZero(offer) && !t.Typed() && r.usable(t) {
		if err := r.off.Accept(t, offer); err != nil {
			return err
		}
		t.split.in |= 1 << KnemRail
	}
	return r.Backend.SetPeerHandle(t, h[OfferLen:])
}

func allZero(p []byte) bool {
	for _, c := range p {
		if c != 0 {
			return false
		}
	}
	return true
}

// Step moves the receiver's pieces: it starts the offload copy at the
// first call (the CTS is out by then), reads its own piece in chunks
// while polling the copy, and reports the offload piece once the copy is
// over and the read piece in.
func (r *railed) Step(t *Transfer, max int) (int, error) {
	if t.side == Sender {
		return r.Backend.Step(t, max)
	}
	sp := &t.split
	from, to := sp.bounds.piece(KnemRail, t.length)
	if to > from && sp.offStart == 0 {
		if err := r.start(t, from, to); err != nil {
			return 0, err
		}
	}
	if sp.offloading {
		if err := r.poll(t, from, to); err != nil {
			return 0, err
		}
	}
	if t.moved < from {
		if sp.offloading {
			max = min(max, pollChunk)
		}
		n, err := r.Backend.Step(t, int(min(int64(max), from-t.moved)))
		if n > 0 && t.moved+int64(n) == from {
			sp.railTook[ReadRail] = monotonic() - t.moveStart
		}
		return n, err
	}
	if sp.offloading {
		return 0, nil
	}
	return int(to - from), nil
}

// start has the Offloader copy bytes [from, to) into the receiver's
// buffers for them.
func (r *railed) start(t *Transfer, from, to int64) error {
	t.split.offStart = monotonic()
	if err := r.off.Copy(t, from, to-from); err != nil {
		return fmt.Errorf("lmt: the %s rail's piece [%d, %d) from rank %d: %w", KnemRail, from, to, t.peer, err)
	}
	t.split.offloading = true
	return nil
}

// poll takes the end of the offload copy, with its time, when it is over.
func (r *railed) poll(t *Transfer, from, to int64) error {
	over, err := r.off.Poll(t)
	if !over {
		return nil
	}
	t.split.offloading = false
	t.split.railTook[KnemRail] = monotonic() - t.split.offStart
	if err != nil {
		return fmt.Errorf("lmt: the %s rail's piece [%d, %d) from rank %d: %w", KnemRail, from, to, t.peer, err)
	}
	return nil
}

// Quiet implements [Quiescer]: a failed receiver completes only once its
// offload copy no longer writes into its buffers.
func (r *railed) Quiet(t *Transfer) bool {
	if t.split.offloading {
		if over, _ := r.off.Poll(t); over {
			t.split.offloading = false
		}
	}
	return !t.split.offloading
}

// Release implements [Releaser]: the sender withdraws its offer, which
// the receiver's copy took when the transfer succeeded with a piece on
// the offload rail.
func (r *railed) Release(t *Transfer) {
	if rel, ok := r.Backend.(Releaser); ok {
		rel.Release(t)
	}
	if t.side != Sender || !t.split.in.has(KnemRail) {
		return
	}
	// The receiver's DONE said its pieces are in: its copy took the
	// declaration.
	from, to := t.split.bounds.piece(KnemRail, t.length)
	r.off.Withdraw(t, t.split.peerIn && to > from)
}

// Chunk, Weighed and Datatypes pass the Split backend's answers on.
func (r *railed) Chunk() int {
	if c, ok := r.Backend.(Chunker); ok {
		return c.Chunk()
	}
	return 0
}

func (r *railed) Weighed() bool {
	w, ok := r.Backend.(Weighed)
	return ok && w.Weighed()
}

func (r *railed) Datatypes() bool {
	d, ok := r.Backend.(Datatyped)
	return ok && d.Datatypes()
}

// BuffersAt appends to dst the pieces of t's buffers that hold bytes
// [from, to) of the message, and returns it. t is not typed.
func (t *Transfer) BuffersAt(dst [][]byte, from, to int64) [][]byte {
	at := int64(0)
	for _, b := range t.iov {
		if at >= to {
			break
		}
		n := int64(len(b))
		if lo, hi := max(from-at, 0), min(to-at, n); lo < hi {
			dst = append(dst, b[lo:hi])
		}
		at += n
	}
	return dst
}
