package nemesis

import (
	"slices"
	"sync/atomic"
	"time"
)

// probeBatch is how many round trips one timing covers: a clock read costs
// about as much as a round trip between two hardware threads of one core.
const probeBatch = 8

// LineLatency measures how long a cache line takes to go from this rank to
// peer: the two ranks take turns writing a word each, on a line of its own
// in the job's segment, rounds times, and the median over batches of
// round trips, halved, is returned. It tells what the topology cannot: on
// a VM the hypervisor moves vCPUs between placements that share a core or
// not (67-70 against 237-268 ns measured here) while sysfs reports the
// same caches; on bare metal it tells a pair sharing a cache from one
// that does not.
//
// Both ranks must call it with each other, about at once (package
// lmt/auto does, in Attach); each pair's calls are numbered, so a rank
// must make as many with its peer as the peer makes with it. A peer that
// does not answer within timeout makes it return an error wrapping
// ErrProbeTimeout. It spins, moving no messages, for as long as it runs:
// rounds of 256 take about 0.1 ms between two cores.
func (ep *Endpoint) LineLatency(peer, rounds int, timeout time.Duration) (time.Duration, error) {
	if err := ep.checkRank(peer, false); err != nil {
		return 0, err
	}
	if peer == ep.rank {
		return 0, errorf(ErrInvalidRank, "LineLatency with itself (rank %d)", peer)
	}
	if rounds < 2*probeBatch || timeout <= 0 {
		return 0, errorf(ErrInvalidArg, "LineLatency of %d rounds within %v: want at least %d rounds and a positive timeout", rounds, timeout, 2*probeBatch)
	}
	if ep.closed {
		return 0, ErrClosed
	}
	p := &ep.peers[peer]
	if p.dead != nil {
		return 0, p.dead
	}
	p.probes++
	pr := probeRun{
		mine:     &ep.seg.proc(ep.rank).probe,
		theirs:   &ep.seg.proc(peer).probe,
		to:       uint64(p.probes)<<48 | uint64(peer+1)<<32,
		from:     uint64(p.probes)<<48 | uint64(ep.rank+1)<<32,
		deadline: time.Now().Add(timeout),
	}
	batches := make([]time.Duration, 0, rounds/probeBatch)
	var ok bool
	if ep.rank < peer {
		ok = pr.lead(rounds, &batches)
	} else {
		ok = pr.follow(rounds, &batches)
	}
	if !ok {
		return 0, errorf(ErrProbeTimeout, "rank %d did not answer within %v (%d of %d batches timed)", peer, timeout, len(batches), rounds/probeBatch)
	}
	slices.Sort(batches)
	return batches[len(batches)/2] / (2 * probeBatch), nil
}

// probeRun is one LineLatency call: mine and theirs are the two ranks'
// words, to and from the values that name this call in each.
type probeRun struct {
	mine, theirs *atomic.Uint64
	to, from     uint64
	deadline     time.Time
}

// lead writes round k and waits for the peer's answer to it, after the
// peer said it is ready (round 0). The peer's word may already name its
// next probe when the leader looks for the last answer (the follower
// leaves once it answered, and the leader may have been descheduled):
// then that answer was given, at a time the leader cannot know, and the
// last batch goes untimed.
func (pr *probeRun) lead(rounds int, batches *[]time.Duration) bool {
	pr.mine.Store(pr.to)
	if !pr.await(pr.from) {
		return false
	}
	start := time.Now()
	for k := 1; k <= rounds; k++ {
		pr.mine.Store(pr.to | uint64(k))
		if k == rounds {
			answered, ok := pr.awaitLast(pr.from | uint64(k))
			if ok && answered && k%probeBatch == 0 {
				*batches = append(*batches, time.Since(start))
			}
			return ok && len(*batches) > 0
		}
		if !pr.await(pr.from | uint64(k)) {
			return false
		}
		if k%probeBatch == 0 {
			now := time.Now()
			*batches = append(*batches, now.Sub(start))
			start = now
		}
	}
	return true
}

// follow answers each round of the leader; the time between its answers to
// rounds k and k+probeBatch is as many round trips.
func (pr *probeRun) follow(rounds int, batches *[]time.Duration) bool {
	pr.mine.Store(pr.to)
	var start time.Time
	for k := 1; k <= rounds; k++ {
		if !pr.await(pr.from | uint64(k)) {
			return false
		}
		pr.mine.Store(pr.to | uint64(k))
		switch {
		case k == 1:
			start = time.Now()
		case (k-1)%probeBatch == 0:
			now := time.Now()
			*batches = append(*batches, now.Sub(start))
			start = now
		}
	}
	return len(*batches) > 0
}

// awaitLast is await for the follower's last answer, which its next probe
// may overwrite: a word that no longer names this call (its high half
// changed) means the answer was given. answered tells which was seen.
func (pr *probeRun) awaitLast(want uint64) (answered, ok bool) {
	for i := 0; ; i++ {
		switch v := pr.theirs.Load(); {
		case v == want:
			return true, true
		case v>>32 != want>>32:
			return false, true
		}
		if i&1023 == 1023 && time.Now().After(pr.deadline) {
			return false, false
		}
	}
}

// await spins until the peer's word holds want, or the deadline passes.
func (pr *probeRun) await(want uint64) bool {
	for i := 0; pr.theirs.Load() != want; i++ {
		if i&1023 == 1023 && time.Now().After(pr.deadline) {
			return false
		}
	}
	return true
}
