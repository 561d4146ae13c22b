package nemesis

import (
	"math/bits"
	"sync/atomic"

	"github.com/knemesis/knemesis/internal/lineops"
	"github.com/knemesis/knemesis/peerfault"
)

// Fastboxes for the peers that talk (§3.2: "fastboxes can be used only
// between nearest neighbors or can be created dynamically between processes
// depending on the communication pattern").
//
// Every rank owns Options.Fastboxes sets of fboxSlots boxes in the segment,
// its pool: the most peers it can send to through fastboxes. In a job no
// larger than the pool plus one, every ordered pair has its set from the
// start, fixed by rank (staticSet): nothing to claim or announce. In a
// larger job a sender sends its first fboxThreshold packets to a peer
// through cells, then claims the next set of its own pool, which only it
// allocates (a counter in its own memory, no atomic operation), and
// announces it with a kindFboxSetup cell naming the set. That cell travels
// in the pair's sequence, so the receiver attaches the set before any
// message the sender puts in it can be next in line: both sides agree on
// which set serves the pair without any shared claim word. Sets are never
// given back (as Open MPI's sm BTL keeps its fast boxes): a pair that
// talked once is likely to talk again, and the bound keeps the cost at
// Options.Fastboxes × (fboxSlots × FastboxSize + lineRingSize) per rank
// whatever the job size.
//
// A receiver polls the fastboxes of the sources its posted receives name,
// at every Poll, and its attached sets (fbActive: the peers that talk to it,
// never the whole job) every 64 Polls. A wildcard receive must find a
// message from any of them: with up to bellScanMax attached sets it polls
// them all at every Poll; with more it reads its bell, one bit per sender,
// which a sender sets after filling a fastbox when it finds its bit clear.
// The receiver takes the whole word with a SWAP and polls only the sources
// whose bits were set. A sender whose bit is already set only reads the
// line, which nobody wrote since: a directed ping-pong never pays for the
// bell. The sender's fastbox store is a release store, not a fence, so its
// read of the bell may pass it and find the bit the receiver is clearing:
// such a message is found by the next scan of the attached sets, at most
// 64 Polls later.
const (
	// DefaultFastboxes: a rank sends through fastboxes to at most 32
	// peers (Open MPI's sm BTL default, btl_sm_max_fbox, is also 32):
	// the 26 neighbours of a 3D stencil and a few more, for 226 KiB of
	// 2 KiB boxes and line rings per rank. See docs/performance.md, "Scaling nemesis to a whole node".
	DefaultFastboxes = 32
	// fboxThreshold packets go to a peer through cells before the sender
	// claims a fastbox set for it (Open MPI: btl_sm_fbox_threshold, 16),
	// so that the peers of a barrier or a one-off exchange do not use up
	// the pool.
	fboxThreshold = 16
	// bellScanMax: up to this many attached sets a wildcard receive polls
	// them all rather than read the bell; each is a line in this core's
	// cache until its sender writes it.
	bellScanMax = 8
)

// staticSet is the set rank src sends to dst through when every pair has
// one: the sets of src are its peers in rank order, itself skipped.
func staticSet(src, dst int) int {
	if dst > src {
		return dst - 1
	}
	return dst
}

// attachStatic gives every pair its set when the pool covers every peer.
func (ep *Endpoint) attachStatic() {
	s := ep.seg
	if s.fastboxes == 0 || s.fastboxes < s.nprocs-1 {
		return
	}
	for i := range ep.peers {
		if i == ep.rank {
			continue
		}
		ep.setOut(i, staticSet(ep.rank, i))
		ep.setIn(i, staticSet(i, ep.rank))
	}
	ep.fbNext = s.fastboxes
}

func (ep *Endpoint) setOut(dst, set int) {
	p := &ep.peers[dst]
	for k := range fboxSlots {
		p.fbOut[k], p.fbOutPl[k] = ep.seg.fbox(ep.rank, set, k)
	}
	p.lnOut = ep.seg.lineRing(ep.rank, set)
}

func (ep *Endpoint) setIn(src, set int) {
	p := &ep.peers[src]
	for k := range fboxSlots {
		p.fbIn[k], p.fbInPl[k] = ep.seg.fbox(src, set, k)
	}
	p.lnIn = ep.seg.lineRing(src, set)
	ep.fbActive = append(ep.fbActive, int32(src))
}

// claimOutBox is where a packet to dst goes when the pair has no fastbox
// set: it claims one when one is due and returns its box for the packet,
// or nil (the packet takes a cell). Callers try the pair's set first, with
// peer.outBox inlined: a pair with a set never comes here.
//
//go:noinline
func (ep *Endpoint) claimOutBox(dst int) (*fboxHdr, []byte) {
	if !ep.claimSet(dst) {
		return nil, nil
	}
	return ep.peers[dst].outBox(&ep.stats)
}

// claimSet takes the next set of this rank's pool for the pair to dst and
// announces it in a cell, once fboxThreshold packets went to dst.
func (ep *Endpoint) claimSet(dst int) bool {
	s := ep.seg
	p := &ep.peers[dst]
	if ep.fbNext >= s.fastboxes || dst == ep.rank || p.sendSeq < fboxThreshold || p.dead != nil {
		return false
	}
	off, c, err := ep.freeQ.dequeue(s)
	if err != nil {
		ep.fail(err)
		return false
	}
	if off == 0 {
		return false // no cell free: claim at a later packet
	}
	set := ep.fbNext
	if ep.postCell(dst, off, c, kindFboxSetup, 0, 0, uint64(set)) != nil {
		return false
	}
	ep.fbNext++
	ep.stats.FastboxSets++
	ep.setOut(dst, set)
	return true
}

// attachSet handles src's announcement of the set it sends here through.
func (ep *Endpoint) attachSet(src int, set uint64) error {
	p := &ep.peers[src]
	if set >= uint64(ep.seg.fastboxes) || src == ep.rank || p.fbIn[0] != nil {
		return ep.distrust(peerfault.Corrupt(src, "set of a fastbox announcement", "%d (pool of %d, attached already: %v)", set, ep.seg.fastboxes, p.fbIn[0] != nil))
	}
	ep.setIn(src, int(set))
	return nil
}

// outBox returns the box of the pair's set the next packet to the rank may
// take, with its payload area: the slot of its sequence number, nil when
// the pair has no set (see claimOutBox) or that box still holds an earlier
// packet.
//
// The box last held message sendSeq-fboxSlots or an earlier one. Once the
// rank has acknowledged all those, the box is known empty without a look
// at its flag, a line the receiver wrote last: in a ping-pong every
// message finds its box acknowledged by the reply to the one before, and
// skips a cache miss, the costliest step of a send when the two CPUs sit
// far apart (docs/performance.md, nemesis, "Fastboxes").
func (p *peer) outBox(stats *Stats) (*fboxHdr, []byte) {
	k := p.sendSeq % fboxSlots
	fb := p.fbOut[k]
	if fb == nil {
		return nil, nil
	}
	if p.sendSeq-p.acked < fboxSlots {
		stats.AckedBoxes++
	} else if fb.full.Load() != 0 {
		return nil, nil
	}
	return fb, p.fbOutPl[k]
}

// nextInFbox reports whether the box the rank's next message would take
// is full: a load of a line this core holds until the sender writes it.
func (p *peer) nextInFbox() bool {
	if r := p.lnIn; r != nil && r.stamp(p.lnRecv).Load() == p.lnRecv+1 {
		return true
	}
	fb := p.fbIn[p.recvSeq%fboxSlots]
	return fb != nil && fb.full.Load() != 0
}

// postFbox hands fb, the box outBox returned, to the rank, its payload
// written: n bytes of a packet of kind whose message is total bytes long,
// next in sequence, and announces it.
func (p *peer) postFbox(fb *fboxHdr, kind uint32, tag, n, total int) {
	fb.seq, fb.tag, fb.len, fb.kind, fb.ack, fb.total = p.sendSeq, int32(tag), uint32(n), kind, p.released, uint64(total)
	p.sendSeq++
	lineops.StoreRelease(&fb.full, 1)
	p.announce()
}

// announce tells the rank that a fastbox or line record holds its next
// packet: it rings the rank's bell unless its bit is still set, and wakes
// the rank if it sleeps.
func (p *peer) announce() {
	if p.bell.Load()&p.bellBit == 0 {
		p.bell.Or(p.bellBit)
	}
	p.wake()
}

// pollActive polls the fastboxes of every source attached here.
func (ep *Endpoint) pollActive() error {
	ep.stats.FullFboxScans++
	for _, src := range ep.fbActive {
		if err := ep.pollFboxes(int(src)); err != nil {
			return err
		}
	}
	return nil
}

// pollWildcard looks for what a wildcard receive may match in the
// fastboxes: all attached sets when they are few, else those of the
// senders that rang the bell.
func (ep *Endpoint) pollWildcard() error {
	if len(ep.fbActive) <= bellScanMax {
		for _, src := range ep.fbActive {
			if err := ep.pollFboxes(int(src)); err != nil {
				return err
			}
		}
		return nil
	}
	for i, w := range ep.bells {
		if w.Load() == 0 {
			continue
		}
		for b := w.Swap(0); b != 0; b &= b - 1 {
			src := 64*i + bits.TrailingZeros64(b)
			if src >= ep.size {
				return ep.fail(errorf(ErrCorrupt, "bell of rank %d rung by rank %d in a job of %d", ep.rank, src, ep.size))
			}
			if err := ep.pollFboxes(src); err != nil {
				return err
			}
		}
	}
	return nil
}

// bellsOf returns the words of rank's bell.
func (s *segment) bellsOf(rank int) []*atomic.Uint64 {
	w := make([]*atomic.Uint64, (s.nprocs+63)/64)
	for i := range w {
		w[i] = s.bellWord(rank, i)
	}
	return w
}
