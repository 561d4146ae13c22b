package nemesis

import "github.com/knemesis/knemesis/internal/memcopy"

// AMHandler is the one-sided layer (package rma) an Endpoint runs from its
// progress loop: it carries active messages, packets that the target's
// handler executes when they arrive (an emulated put, get or atomic, a
// window's collective step, a put's notification), in the manner of
// MPICH's ch4 active-message fallback for RMA. Set it with
// [Endpoint.SetAM].
//
// Active messages share the per-pair sequence of every other packet: one
// sent to dst after a message, an RTS or another active message arrives
// after it, and is handled in that order. That order is what lets a put's
// notification follow its data.
//
// The methods are called from the goroutine driving the endpoint, never
// concurrently, under the rules of [LMT]: they must not block, may call
// SendAM and the Poll-free accessors, but not Poll, Wait, Send or Recv.
type AMHandler interface {
	// HandleAM receives a packet rank src sent with SendAM. pkt is only
	// valid during the call. An error means the packet stream is broken
	// and fails the endpoint.
	HandleAM(src int, pkt []byte) error
	// Progress advances what the handler has in flight; called from
	// every Poll, after the LMT's.
	Progress() error
	// PeerFailed is called once when rank's process is found gone.
	PeerFailed(rank int, err error)
}

// AMMeter is implemented by an AMHandler that makes progress other than
// through packets: work other ranks hand it in shared memory (package
// rma's notification rings), operations its Progress advances on its own
// (a put retried once a ring has room, a CMA transfer's next chunk).
// Moved counts such steps so far, so that a blocked call tells a Poll
// that made some from an idle one, and a rank about to doze does not
// sleep on what its last Poll did. Ranks that hand it such work wake it
// with [Endpoint.Wake].
type AMMeter interface {
	Moved() uint64
}

// Wake wakes rank if it dozes in a blocked call (doze.go), for an
// AMHandler that has just handed it work through memory of its own: a
// load of a line that stays in this core's cache while the rank is
// awake, and a system call only when it sleeps. Like a fastbox's filler,
// it may miss a rank going to sleep at that very moment, which then finds
// the work when its nap ends.
func (ep *Endpoint) Wake(rank int) {
	if uint(rank) < uint(len(ep.peers)) && rank != ep.rank && !ep.peers[rank].net {
		ep.peers[rank].wake()
	}
}

// SetAM makes h the endpoint's active-message handler (nil removes it).
// Active messages that arrived while the endpoint had none were kept, in
// arrival order: h receives them first, before SetAM returns. (A rank
// creating its first window sends to peers that may not have reached
// theirs yet.)
func (ep *Endpoint) SetAM(h AMHandler) error {
	ep.am = h
	ep.amMeter, _ = h.(AMMeter)
	for h != nil && len(ep.amHeld) > 0 {
		m := ep.amHeld[0]
		ep.amHeld = ep.amHeld[1:]
		if err := h.HandleAM(m.src, m.pkt); err != nil {
			return ep.fail(err)
		}
	}
	return nil
}

// heldAM is an active message that arrived before the endpoint had a
// handler.
type heldAM struct {
	src int
	pkt []byte
}

// handleAM hands an arriving active message to the handler, or keeps a
// copy of it until there is one.
func (ep *Endpoint) handleAM(src int, pkt []byte) error {
	if ep.am != nil {
		return ep.am.HandleAM(src, pkt)
	}
	held := make([]byte, len(pkt))
	memcopy.Copy(held, pkt)
	ep.amHeld = append(ep.amHeld, heldAM{src, held})
	return nil
}

// AM returns the endpoint's active-message handler, nil if none is set.
func (ep *Endpoint) AM() AMHandler { return ep.am }

// MaxAM is the largest packet SendAM carries: one cell's payload.
func (ep *Endpoint) MaxAM() int { return ep.seg.payloadSize }

// SendAM sends pkt to the active-message handler of rank dst without
// blocking: ok is false when no fastbox or cell is free right now (retry
// from Progress).
func (ep *Endpoint) SendAM(dst int, pkt []byte) (ok bool, err error) {
	return ep.sendShort(dst, kindAM, pkt)
}

// PeerFailure returns the error of rank's disappearance once the endpoint
// has found it gone, else nil.
func (ep *Endpoint) PeerFailure(rank int) error {
	if err := ep.checkRank(rank, false); err != nil {
		return err
	}
	return ep.peers[rank].dead
}

// WaitUntil polls until done reports true or an error, as Wait does for a
// request: spinning, then yielding the CPU, and checking every
// LivenessInterval whether peers still live (those found gone are failed,
// the handlers told, before done is asked again). A layer that completes
// its own operations from the progress loop (an AMHandler) blocks with it.
func (ep *Endpoint) WaitUntil(done func() (bool, error)) error {
	// Not ep.wait: a closure passed as an await.Cond escapes to the
	// heap, one allocation per call (rma's WaitNotification counts them).
	d := (*driving)(ep)
	idle, busy := 0, 0
	for {
		if ok, err := done(); ok || err != nil {
			return err
		}
		mark := d.Mark()
		if err := d.Advance(); err != nil {
			return err
		}
		if d.Mark() != mark {
			if idle, busy = 0, busy+1; busy%waitLoop.BusyEvery == 0 {
				if err := d.Live(); err != nil {
					return err
				}
			}
			continue
		}
		if idle++; idle%waitLoop.Every == 0 {
			if err := d.Live(); err != nil {
				return err
			}
		}
		if err := d.Idle(idle); err != nil {
			return err
		}
	}
}

// Expect adds delta to the count of things this rank awaits from src (or
// from anyone, for AnySource), as a posted receive does: while it is
// positive, every Poll looks at src's fastboxes, where its short packets,
// active messages included, usually arrive; otherwise Poll looks there only
// every 64 calls. A layer that waits for an active message from src raises
// it for the wait and lowers it after.
func (ep *Endpoint) Expect(src int, delta int) error {
	if err := ep.checkRank(src, true); err != nil {
		return err
	}
	ep.expect(src, int32(delta))
	return nil
}
