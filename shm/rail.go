package shm

import (
	"fmt"

	"github.com/knemesis/knemesis/lmt"
	"golang.org/x/sys/unix"
)

// The shm ring as a rail of a Split message (lmt.RingRail: multirail-shm's
// third rail, an lmt.Ringer). Each ordered pair that moves such messages
// has a second ring, the rail's, beside the stream's: the same file
// layout, the same slots from the sender's pool (or the ring's own where
// the receiver cannot map the pool), the same counters checked on every
// read, and the same push and pull, fed from the message's ring piece
// instead of the transfer's cursor. It is a ring of its own because the
// stream's is scheduled message by message by the engine's channel, and a
// ring piece moves while its message's CMA pieces do, outside it.
//
// The engine gives the rail's ring to one message at a time (lmt's
// rails_ring.go), so every entry of it belongs to the message being read:
// one that names another is corrupt, where the stream's ring would skip it
// as left early or by a truncated message. A failed message gives the ring
// up (RingAbort): its slots come back to the sender's pool, the ring is
// not used again, and its file, if the sender has not unlinked it yet, is
// removed.

// RingOpen implements lmt.Ringer: it maps the pair's rail ring on first
// use. The receiver opens it before its CTS and judges then whether it
// maps the sender's pool; the sender, after the CTS, finds it mapped by
// the receiver and removes its name.
func (s *shm) RingOpen(t *lmt.Transfer) error {
	rp, src, dst := s.railFor(t)
	if *rp == nil {
		r, err := s.open(src, dst, railRing)
		if err != nil {
			return err
		}
		*rp = r
	}
	r := *rp
	if t.Side() == lmt.Receiver && r.verdict == reachUnknown {
		s.judge(r)
	}
	if t.Side() == lmt.Sender && r.path != "" {
		unix.Unlink(r.path)
		r.path = ""
	}
	switch {
	case r.corrupt != nil:
		return r.corrupt
	case r.broken:
		return fmt.Errorf("lmt: shm rail ring from rank %d to rank %d was given up by an earlier failed message", src, dst)
	}
	return nil
}

// railFor returns t's side's rail ring with its peer, and the pair.
func (s *shm) railFor(t *lmt.Transfer) (**ring, int, int) {
	if t.Side() == lmt.Sender {
		return &s.railOut[t.Peer()], s.env.Rank, t.Peer()
	}
	return &s.railIn[t.Peer()], t.Peer(), s.env.Rank
}

// RingPush implements lmt.Ringer: the sender fills the rail ring's free
// entries with p's next bytes.
func (s *shm) RingPush(t *lmt.Transfer, p *lmt.RingPiece, max int) (int, error) {
	return s.push(s.railOut[t.Peer()], t, p, max, false)
}

// RingPull implements lmt.Ringer: the receiver empties the rail ring's
// filled entries into p.
func (s *shm) RingPull(t *lmt.Transfer, p *lmt.RingPiece, max int) (int, error) {
	return s.pull(s.railIn[t.Peer()], t, p, max)
}

// ownerCorrupt records and returns the error of a rail ring entry that
// names another message than the one that holds the ring.
func (s *shm) ownerCorrupt(r *ring, owner, want uint64) error {
	r.corrupt = lmt.Corrupt(r.src, "entry of "+r.name(),
		"a piece of message %d, while message %d holds the ring", owner, want)
	return r.corrupt
}

// RingAbort implements lmt.Ringer: the ring is not used again; a sender
// takes back its slots, which a receiver may have left unread.
func (s *shm) RingAbort(t *lmt.Transfer) {
	rp, _, _ := s.railFor(t)
	r := *rp
	if r == nil {
		return
	}
	r.breakOff()
	if t.Side() == lmt.Sender {
		s.reclaim(r)
	}
}
