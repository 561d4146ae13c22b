package threshold

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/knemesis/knemesis/lmt"
)

// Learner chooses, per power-of-two size class, among transfer methods
// (the eager path and LMT backends) from the job's own transfer times, and
// settles on the fastest. It is a deterministic state machine fed samples
// (size, candidate, duration): it reads no clock, so scripted timings test
// every transition.
//
// Each class starts from the table's choice (the DMA_min formula of
// Buntinas, Goglin, Goodell, Mercier and Moreaud, "Cache-Efficient,
// Intranode, Large-Message MPI Communication with MPICH2-Nemesis",
// ICPP 2009, §3.5, or the tuning file), which stays the answer where
// nothing was measured. Its life is a series of rounds:
//
//   - Exploring: every candidate eligible for the class, the incumbent
//     first, is measured with one cold message, whose sample is dropped
//     (its ring, pipe or cells are out of the caches after another
//     candidate ran), then [LearnerSamples] counted ones; its cost is their
//     median, in ns per byte.
//   - Settled: the cheapest is kept. The incumbent stays unless another
//     is cheaper by more than [LearnerMargin], so two candidates within a
//     few percent of each other do not take turns, and two that differ by
//     more than 10% are never confused by the margin.
//   - Re-check: after [LearnerRecheck] samples of the settled candidate a
//     new round measures the contenders again: the candidates whose last
//     cost was within [LearnerContender] of the settled one's. Every
//     [LearnerFullRound]-th re-check measures all. A round that confirms
//     the incumbent doubles the wait before the next (up to
//     [LearnerRecheckMax]), one that changes it resets the wait. A settled
//     candidate whose running cost rises past 1.5× what it was settled at
//     starts a full round at once: the machine changed (a hypervisor moved
//     the vCPUs). Measuring only the contenders is what keeps a re-check
//     cheap: a round is 1 + [LearnerSamples] messages per candidate, and
//     a method several times slower than the settled one, re-measured at
//     every re-check, costs a visible share of the throughput between
//     re-checks (git log -S "Auto's choice (issue 27)" docs/performance.md).
//
// A sample for another candidate than the one the state expects (a message
// still in flight from the previous step, a forced backend) is ignored.
// Choose and Record allocate nothing, take no lock and look nothing up in a
// map: the state is an array indexed by size class. One Learner serves one
// peer from one goroutine.
type Learner struct {
	cands   []Backend
	classes [maxClasses]learnClass
}

// Learner constants, the same for every class.
const (
	// LearnerSamples counted samples measure a candidate in a round.
	LearnerSamples = 3
	// LearnerMargin: another candidate displaces the incumbent only when
	// cheaper by more than this fraction.
	LearnerMargin = 0.05
	// LearnerRecheck samples of the settled candidate pass before the
	// first re-check; LearnerRecheckMax bounds the doubled wait.
	LearnerRecheck    = 64
	LearnerRecheckMax = 4096
	// learnerDrift: a settled candidate whose running cost exceeds its
	// settled cost by this factor triggers a re-check.
	learnerDrift = 1.5
	// LearnerContender: a re-check measures again the candidates whose
	// last cost was below this factor times the settled one's; every
	// LearnerFullRound-th re-check measures all of them.
	LearnerContender = 1.5
	LearnerFullRound = 4
)

type learnPhase uint8

const (
	learnIdle learnPhase = iota // no message of the class yet
	learnExploring
	learnSettled
)

// maxLearned bounds the methods one Learner weighs: the eager path, every
// LMT backend a peer may use, and a tuned table's own choice. A class
// holds them as bits of a learnSet.
const maxLearned = 16

// learnSet is a set of candidates, by index bit.
type learnSet uint16

type learnClass struct {
	phase     learnPhase
	eligible  learnSet // candidates allowed in this class
	start     uint8    // the table's choice
	best      uint8    // the settled or incumbent candidate
	probe     uint8    // candidate measured now (exploring)
	round     learnSet // candidates this round measures
	done      learnSet // candidates measured in this round
	skip      bool     // the next sample of probe (or best) is the cold one
	n         uint8    // samples of probe so far this round
	samples   [LearnerSamples]float64
	cost      [maxLearned]float64 // median of the last round, ns/byte
	running   float64             // settled candidate's running cost
	settledAt float64             // its cost when it was settled
	count     uint32              // samples of best since settling
	interval  uint32              // samples before the next re-check
	switches  uint32              // times best changed after a round
	rounds    uint32              // rounds completed
	rechecks  uint32              // periodic re-checks started
}

// NewLearner returns a learner over cands (at most 16, Eager allowed) that
// starts each class from t's choice. Eager competes only in classes whose
// every size is at most eagerMax (the endpoint's eager limit: beyond it a
// message cannot go eagerly), LMT backends only in classes whose every size
// is above lmtFrom (below, messages never reach the LMT). A class with a
// single eligible candidate is settled at once.
func NewLearner(t *Table, cands []Backend, eagerMax, lmtFrom int64) (*Learner, error) {
	if t == nil {
		return nil, fmt.Errorf("threshold: NewLearner needs a table")
	}
	l := &Learner{}
	add := func(b Backend) error {
		for _, c := range l.cands {
			if c == b {
				return nil
			}
		}
		if !b.Valid() {
			return fmt.Errorf("threshold: NewLearner: %q is not a transfer method", b)
		}
		if len(l.cands) == maxLearned {
			return fmt.Errorf("threshold: NewLearner: more than %d candidates", maxLearned)
		}
		l.cands = append(l.cands, b)
		return nil
	}
	for _, b := range cands {
		if err := add(b); err != nil {
			return nil, err
		}
	}
	for c := range l.classes {
		lo, hi := int64(1)<<c, int64(1)<<(c+1)-1
		if c == 0 {
			lo = 0
		}
		choice := t.Choose(lo)
		want := Eager
		if !choice.Eager {
			want = choice.Backend
		}
		if err := add(want); err != nil {
			return nil, err
		}
		k := &l.classes[c]
		for i, b := range l.cands {
			if b == Eager && hi <= eagerMax || b != Eager && lo > lmtFrom && carries(b, hi) {
				k.eligible |= 1 << i
			}
			if b == want {
				k.start = uint8(i)
			}
		}
		k.eligible |= 1 << k.start // the table's choice is always allowed
		k.best, k.interval = k.start, LearnerRecheck
	}
	return l, nil
}

// carries reports whether backend b carries every message of its size
// class, up to hi bytes (arena-copy's slots end at its Identity's MaxLen).
func carries(b Backend, hi int64) bool {
	id, ok := lmt.IdentityOf(string(b))
	return !ok || id.MaxLen == 0 || hi <= id.MaxLen
}

// Candidates returns the methods l weighs, by index.
func (l *Learner) Candidates() []Backend { return l.cands }

// Index returns the index of b among the candidates, or -1.
func (l *Learner) Index(b Backend) int {
	for i, c := range l.cands {
		if c == b {
			return i
		}
	}
	return -1
}

// Choose returns the method for the next message of size bytes: the
// candidate under measurement while the class explores, else the settled
// one.
func (l *Learner) Choose(size int64) Backend {
	k := &l.classes[classOf(size)]
	switch k.phase {
	case learnIdle:
		k.startRound(k.start, k.eligible)
		if k.phase == learnSettled {
			return l.cands[k.best]
		}
		return l.cands[k.probe]
	case learnExploring:
		return l.cands[k.probe]
	}
	return l.cands[k.best]
}

// Record feeds the time a message of size bytes took by candidate index
// cand (see Index).
func (l *Learner) Record(size int64, cand int, d time.Duration) {
	if cand < 0 || cand >= len(l.cands) || size <= 0 || d <= 0 {
		return
	}
	k := &l.classes[classOf(size)]
	x := float64(d) / float64(size)
	switch k.phase {
	case learnExploring:
		if uint8(cand) == k.probe {
			k.explore(x)
		}
	case learnSettled:
		if uint8(cand) == k.best {
			k.settled(x)
		}
	}
}

// startRound measures the candidates of set again, from first.
func (k *learnClass) startRound(first uint8, set learnSet) {
	if k.eligible&(k.eligible-1) == 0 { // one candidate: nothing to learn
		k.phase, k.best = learnSettled, first
		k.interval = ^uint32(0)
		return
	}
	k.phase, k.round, k.done, k.probe, k.n, k.skip = learnExploring, set|1<<first, 0, first, 0, true
}

// contenders are the candidates whose last cost was within
// LearnerContender of the settled one's, the settled one included.
func (k *learnClass) contenders() learnSet {
	set := learnSet(1) << k.best
	for i := range uint8(maxLearned) {
		if k.eligible&(1<<i) != 0 && k.cost[i] < LearnerContender*k.cost[k.best] {
			set |= 1 << i
		}
	}
	return set
}

func (k *learnClass) explore(x float64) {
	if k.skip {
		k.skip = false
		return
	}
	k.samples[k.n] = x
	k.n++
	if k.n < LearnerSamples {
		return
	}
	k.cost[k.probe] = median(k.samples)
	k.done |= 1 << k.probe
	if next := k.round &^ k.done; next != 0 {
		k.probe, k.n, k.skip = lowestBit(next), 0, true
		return
	}
	k.settle()
}

// settle ends a round: the cheapest candidate, unless the incumbent is
// within LearnerMargin of it.
func (k *learnClass) settle() {
	bi := k.best
	for i := range uint8(maxLearned) {
		if k.round&(1<<i) != 0 && k.cost[i] < k.cost[bi] {
			bi = i
		}
	}
	if k.rounds > 0 && k.cost[k.best] <= k.cost[bi]*(1+LearnerMargin) {
		bi = k.best
	}
	if k.rounds > 0 && bi == k.best {
		k.interval = min(2*k.interval, LearnerRecheckMax)
	} else {
		if k.rounds > 0 {
			k.switches++
		}
		k.interval = LearnerRecheck
	}
	k.rounds++
	k.phase, k.count = learnSettled, 0
	k.skip = bi != k.probe // the last candidate measured ran last: bi is cold
	k.best, k.running, k.settledAt = bi, k.cost[bi], k.cost[bi]
}

func (k *learnClass) settled(x float64) {
	if k.skip {
		k.skip = false
		return
	}
	k.count++
	k.running += (x - k.running) / 8
	switch {
	case k.count >= LearnerSamples && k.running > learnerDrift*k.settledAt:
		k.startRound(k.best, k.eligible) // the machine changed
	case k.count >= k.interval:
		k.rechecks++
		set := k.contenders()
		if k.rechecks%LearnerFullRound == 0 {
			set = k.eligible
		}
		k.startRound(k.best, set)
	}
}

func lowestBit(m learnSet) uint8 { return uint8(bits.TrailingZeros16(uint16(m))) }

// median of the samples, without allocating.
func median(s [LearnerSamples]float64) float64 {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

// LearnerState is what a class has learned, for `lmtbench` and
// Selection.Describe.
type LearnerState struct {
	Settled  bool
	Best     Backend
	Costs    []float64 // ns per byte by candidate, 0 where not measured
	Rounds   uint32    // exploration rounds completed
	Switches uint32    // rounds that changed the choice
	// NextRecheck is how many samples of Best remain before the next
	// round (while settled).
	NextRecheck uint32
}

// State returns the state of the class of size.
func (l *Learner) State(size int64) LearnerState {
	k := &l.classes[classOf(size)]
	s := LearnerState{Settled: k.phase == learnSettled, Best: l.cands[k.best],
		Costs: append([]float64(nil), k.cost[:len(l.cands)]...), Rounds: k.rounds, Switches: k.switches}
	if s.Settled && k.interval > k.count {
		s.NextRecheck = k.interval - k.count
	}
	return s
}
