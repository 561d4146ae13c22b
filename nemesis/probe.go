package nemesis

import (
	"time"

	"github.com/knemesis/knemesis/internal/lineprobe"
)

// LineLatency measures how long a cache line takes to go from this rank to
// peer: the two ranks take turns writing a word each, on a line of its own
// in the job's segment, rounds times, and the median over batches of
// round trips, halved, is returned. It tells what the topology cannot: on
// a VM the hypervisor moves vCPUs between placements that share a core or
// not (several times slower across cores: docs/performance.md, nemesis)
// while sysfs reports the same caches; on bare metal it tells a pair
// sharing a cache from one that does not.
//
// Both ranks must call it with each other, about at once (package
// package auto does, in Attach); each pair's calls are numbered, so a rank
// must make as many with its peer as the peer makes with it. A peer whose
// word stays the same for timeout makes it return an error wrapping
// ErrProbeTimeout; one that keeps answering, however slowly a loaded
// machine lets it, is waited for. It spins, moving no messages, for as long as it runs:
// rounds of 256 take about 0.1 ms between two cores.
func (ep *Endpoint) LineLatency(peer, rounds int, timeout time.Duration) (time.Duration, error) {
	if err := ep.checkRank(peer, false); err != nil {
		return 0, err
	}
	if peer == ep.rank {
		return 0, errorf(ErrInvalidRank, "LineLatency with itself (rank %d)", peer)
	}
	if rounds < lineprobe.MinRounds || timeout <= 0 {
		return 0, errorf(ErrInvalidArg, "LineLatency of %d rounds within %v: want at least %d rounds and a positive timeout", rounds, timeout, lineprobe.MinRounds)
	}
	if ep.closed {
		return 0, ErrClosed
	}
	p := &ep.peers[peer]
	if p.dead != nil {
		return 0, p.dead
	}
	p.probes++
	d, timed, ok := lineprobe.Run{
		Mine:   &ep.seg.proc(ep.rank).probe,
		Theirs: &ep.seg.proc(peer).probe,
		Call:   p.probes,
		Me:     uint16(ep.rank),
		Peer:   uint16(peer),
		Lead:   ep.rank < peer,
		Rounds: rounds,
		Stall:  timeout,
	}.Measure()
	if !ok {
		return 0, errorf(ErrProbeTimeout, "rank %d gave no answer for %v (%d of %d batches timed)", peer, timeout, timed, rounds/lineprobe.Batch)
	}
	return d, nil
}
