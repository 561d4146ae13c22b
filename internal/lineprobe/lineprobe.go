// Package lineprobe times a cache line between two processes (or
// threads): each side owns one 64-bit word in memory both map, and the two
// take turns writing theirs and waiting for the other's, as a ping-pong of
// one line. Half the round-trip time is how long a store takes to become
// visible on the other CPU, which tells what a VM's reported topology
// cannot: whether the hypervisor runs the two vCPUs on one core or on two,
// several times slower (docs/performance.md, internal/lineprobe).
//
// nemesis.Endpoint.LineLatency runs it on words of the job's segment;
// lmtbench runs it between its two ranks around every sample when no
// external placement probe is given.
package lineprobe

import (
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Batch is how many round trips one timing covers: a clock read costs
// about as much as a round trip between two hardware threads of one core.
const Batch = 8

// MinRounds is the fewest rounds a Run accepts: two timed batches.
const MinRounds = 2 * Batch

// Run is one probe between two sides. Mine is written only by this side,
// Theirs only by the other. Call numbers the probe within the pair (the
// same on both sides, different from the pair's previous probe) and Me and
// Peer name the sides (any two different values below 1<<16), so that a
// side never mistakes the other's answer to an earlier probe for one to
// this.
type Run struct {
	Mine, Theirs *atomic.Uint64
	Call         uint16
	Me, Peer     uint16
	Lead         bool // exactly one side leads
	Rounds       int  // at least MinRounds
	// Stall is how long the other side's word may stay the same before
	// the probe gives up on it. The probe as a whole may take longer: on a
	// machine whose CPUs other processes hold, the two sides take turns
	// and every round waits for the scheduler, but each answer still
	// comes.
	Stall time.Duration
}

// Measure runs the probe and returns the one-way time: the median over
// batches of Batch round trips, halved, and how many batches it timed. ok
// is false when the other side's word stayed the same for Stall, or no
// batch was timed.
//
// Each word holds the call in bits 48-63, 1 + the partner's name in bits
// 32-47 and the round in the low half.
func (r Run) Measure() (oneWay time.Duration, timed int, ok bool) {
	p := run{
		mine:     r.Mine,
		theirs:   r.Theirs,
		to:       uint64(r.Call)<<48 | (uint64(r.Peer)+1)<<32,
		from:     uint64(r.Call)<<48 | (uint64(r.Me)+1)<<32,
		stall:    r.Stall,
		deadline: time.Now().Add(r.Stall),
	}
	p.seen = p.theirs.Load()
	batches := make([]time.Duration, 0, r.Rounds/Batch)
	if r.Lead {
		ok = p.lead(r.Rounds, &batches)
	} else {
		ok = p.follow(r.Rounds, &batches)
	}
	if !ok || len(batches) == 0 {
		return 0, len(batches), false
	}
	slices.Sort(batches)
	return batches[len(batches)/2] / (2 * Batch), len(batches), true
}

// run is one Measure: mine and theirs are the two sides' words, to and
// from the values that name this call in each.
type run struct {
	mine, theirs *atomic.Uint64
	to, from     uint64
	stall        time.Duration
	deadline     time.Time // stall after the other side's word last changed
	seen         uint64    // that word at the last pause
}

// lead writes round k and waits for the peer's answer to it, after the
// peer said it is ready (round 0). The peer's word may already name its
// next probe when the leader looks for the last answer (the follower
// leaves once it answered, and the leader may have been descheduled):
// then that answer was given, at a time the leader cannot know, and the
// last batch goes untimed.
func (p *run) lead(rounds int, batches *[]time.Duration) bool {
	p.mine.Store(p.to)
	if !p.await(p.from) {
		return false
	}
	start := time.Now()
	for k := 1; k <= rounds; k++ {
		p.mine.Store(p.to | uint64(k))
		if k == rounds {
			answered, ok := p.awaitLast(p.from | uint64(k))
			if ok && answered && k%Batch == 0 {
				*batches = append(*batches, time.Since(start))
			}
			return ok
		}
		if !p.await(p.from | uint64(k)) {
			return false
		}
		if k%Batch == 0 {
			now := time.Now()
			*batches = append(*batches, now.Sub(start))
			start = now
		}
	}
	return true
}

// follow answers each round of the leader; the time between its answers to
// rounds k and k+Batch is as many round trips.
func (p *run) follow(rounds int, batches *[]time.Duration) bool {
	p.mine.Store(p.to)
	var start time.Time
	for k := 1; k <= rounds; k++ {
		if !p.await(p.from | uint64(k)) {
			return false
		}
		p.mine.Store(p.to | uint64(k))
		switch {
		case k == 1:
			start = time.Now()
		case (k-1)%Batch == 0:
			now := time.Now()
			*batches = append(*batches, now.Sub(start))
			start = now
		}
	}
	return true
}

// awaitLast is await for the follower's last answer, which its next probe
// may overwrite: a word that no longer names this call (its high half
// changed) means the answer was given. answered tells which was seen.
func (p *run) awaitLast(want uint64) (answered, ok bool) {
	for i := 0; ; i++ {
		switch v := p.theirs.Load(); {
		case v == want:
			return true, true
		case v>>32 != want>>32:
			return false, true
		}
		if i&1023 == 1023 && !p.pause() {
			return false, false
		}
	}
}

// await spins until the peer's word holds want, or it stalls.
func (p *run) await(want uint64) bool {
	for i := 0; p.theirs.Load() != want; i++ {
		if i&1023 == 1023 && !p.pause() {
			return false
		}
	}
	return true
}

// pause is called every 1024 reads of a word that did not change, a few
// µs, far longer than a line takes between any two CPUs: the peer is not
// running. It gives the CPU away, so that two sides sharing one CPU take
// turns at each round (and measure the context switches, a placement
// that shares nothing) instead of only at the scheduler's tick. It reports
// whether the peer is still making progress: its word changed within the
// last Stall.
func (p *run) pause() bool {
	now := time.Now()
	if v := p.theirs.Load(); v != p.seen {
		p.seen, p.deadline = v, now.Add(p.stall)
	} else if now.After(p.deadline) {
		return false
	}
	_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	return true
}
