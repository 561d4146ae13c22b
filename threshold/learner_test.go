package threshold

import (
	"testing"
	"time"
)

// machine scripts transfer costs in ns per byte by method; noise, when set,
// multiplies the i-th sample by noise[i%len(noise)].
type machine struct {
	cost  map[Backend]float64
	noise []float64
	i     int
}

func (m *machine) time(b Backend, size int64) time.Duration {
	f := 1.0
	if len(m.noise) > 0 {
		f = m.noise[m.i%len(m.noise)]
	}
	m.i++
	return time.Duration(m.cost[b] * f * float64(size))
}

// drive sends n messages of size through l on m and returns the method of
// each.
func drive(t *testing.T, l *Learner, m *machine, size int64, n int) []Backend {
	t.Helper()
	out := make([]Backend, n)
	for i := range out {
		b := l.Choose(size)
		out[i] = b
		l.Record(size, l.Index(b), m.time(b, size))
	}
	return out
}

// tableFrom is a table sending sizes below lmtMin eagerly, then by b.
func tableFrom(lmtMin int64, b Backend) *Table {
	return &Table{LMTMin: Threshold{Bytes: lmtMin}, Rules: []Rule{{From: lmtMin, Backend: b}}}
}

func newTestLearner(t *testing.T, tab *Table, cands ...Backend) *Learner {
	t.Helper()
	l, err := NewLearner(tab, cands, 64<<10, 4<<10-1)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// changes counts the messages sent by another method than the previous.
func changes(seq []Backend) int {
	n := 0
	for i := 1; i < len(seq); i++ {
		if seq[i] != seq[i-1] {
			n++
		}
	}
	return n
}

func TestLearnerConvergesWithinOneRound(t *testing.T) {
	const size = 1 << 20
	l := newTestLearner(t, tableFrom(16<<10, Shm), Shm, CMASplit, Vmsplice)
	m := &machine{cost: map[Backend]float64{Shm: 0.30, CMASplit: 0.10, Vmsplice: 0.20}}
	// A round: each of 3 candidates, table's choice first, one cold
	// message and LearnerSamples counted ones.
	round := 3 * (1 + LearnerSamples)
	seq := drive(t, l, m, size, round+50)
	want := []Backend{Shm, Shm, Shm, Shm, CMASplit, CMASplit, CMASplit, CMASplit, Vmsplice, Vmsplice, Vmsplice, Vmsplice}
	for i, b := range want {
		if seq[i] != b {
			t.Fatalf("message %d went by %s, want %s (exploration order: table's choice, then by index): %v", i, seq[i], b, seq[:round])
		}
	}
	for i, b := range seq[round:] {
		if b != CMASplit {
			t.Fatalf("message %d after the round went by %s, want cma-split (3x cheaper than shm)", round+i, b)
		}
	}
	s := l.State(size)
	if !s.Settled || s.Best != CMASplit || s.Rounds != 1 || s.Switches != 0 {
		t.Fatalf("state %+v, want settled on cma-split after 1 round, 0 switches", s)
	}
}

// arena-copy is weighed only in the size classes it carries whole: below
// its slots' 256 KiB it wins where it is cheapest, from the class of 256
// KiB up no message is sent by it, not even to explore, and the cheapest
// of the rest wins. (Eager, the table's choice below 4 KiB, is a fourth
// candidate up to the 64 KiB eager limit.)
func TestLearnerBoundsArenaCopy(t *testing.T) {
	m := &machine{cost: map[Backend]float64{CMA: 0.30, ArenaCopy: 0.10, Shm: 0.20, Eager: 0.40}}
	for _, c := range []struct {
		size int64
		want Backend
	}{{16 << 10, ArenaCopy}, {256<<10 - 1, ArenaCopy}, {256 << 10, Shm}, {4 << 20, Shm}} {
		l := newTestLearner(t, tableFrom(4<<10, CMA), CMA, ArenaCopy, Shm)
		seq := drive(t, l, m, c.size, 4*(1+LearnerSamples)+20)
		for i, b := range seq {
			if b == ArenaCopy && c.size >= 256<<10 {
				t.Fatalf("%d bytes: message %d went by arena-copy, which carries at most 256 KiB", c.size, i)
			}
		}
		if s := l.State(c.size); !s.Settled || s.Best != c.want {
			t.Errorf("%d bytes: state %+v, want settled on %s", c.size, s, c.want)
		}
	}
}

// The re-check cadence in exact message counts, with two candidates the
// table's choice (A) wins by 11% under ±4% noise: it is never displaced,
// and the rounds come after 64, 128, 256... counted samples.
func TestLearnerRecheckCadenceAndNoOscillation(t *testing.T) {
	const size = 256 << 10
	l := newTestLearner(t, tableFrom(16<<10, CMA), CMA, Shm)
	m := &machine{cost: map[Backend]float64{CMA: 1.0, Shm: 1.11}, noise: []float64{1.04, 0.96, 1.0, 0.97, 1.03}}
	seq := drive(t, l, m, size, 20000)
	var starts []int
	for i := 1; i < len(seq); i++ {
		if seq[i] == Shm && seq[i-1] == CMA {
			starts = append(starts, i)
		}
	}
	// Round 1: cma 0-3, shm 4-7. Settled from 8: one cold cma message
	// (shm ran last), then 64 counted; round 2 from 73 (cma 73-76,
	// shm 77-80); settled from 81, cold + 128: round 3 at 210 + 4 ...
	want := []int{4}
	at := 8
	for interval := LearnerRecheck; at < len(seq); interval = min(2*interval, LearnerRecheckMax) {
		at += 1 + interval // cold message + counted samples
		if at+4 < len(seq) {
			want = append(want, at+4)
		}
		at += 2 * (1 + LearnerSamples)
	}
	if len(starts) != len(want) {
		t.Fatalf("shm explored at %v, want at %v", starts, want)
	}
	for i := range want {
		if starts[i] != want[i] {
			t.Fatalf("shm explored at %v, want at %v", starts, want)
		}
	}
	if s := l.State(size); s.Best != CMA || s.Switches != 0 {
		t.Fatalf("state %+v: want cma kept, 0 switches (shm is 11%% slower)", s)
	}
	// Each round leaves cma twice (to explore shm, back): nothing else.
	if got := changes(seq); got != 2*len(want) {
		t.Fatalf("%d changes of method in %d messages, want %d (2 per round)", got, len(seq), 2*len(want))
	}
}

// Two candidates within LearnerMargin: the incumbent stays.
func TestLearnerMarginKeepsIncumbent(t *testing.T) {
	const size = 1 << 20
	l := newTestLearner(t, tableFrom(16<<10, CMA), CMA, Shm)
	m := &machine{cost: map[Backend]float64{CMA: 1.0, Shm: 0.97}}
	drive(t, l, m, size, 8)
	if s := l.State(size); s.Best != Shm {
		t.Fatalf("first round: best %s, want shm (first round has no incumbent)", s.Best)
	}
	m.cost[CMA] = 0.96 // cma now 1% cheaper: within the margin
	drive(t, l, m, size, 5000)
	if s := l.State(size); s.Best != Shm || s.Switches != 0 || s.Rounds < 5 {
		t.Fatalf("state %+v: want shm kept over %d rounds, 0 switches", s, s.Rounds)
	}
}

// The machine changes: the settled method slows down by 2x; the drift
// starts a round within a few messages, which moves the class.
func TestLearnerFollowsASlowerBest(t *testing.T) {
	const size = 1 << 20
	l := newTestLearner(t, tableFrom(16<<10, CMA), CMA, Shm)
	m := &machine{cost: map[Backend]float64{CMA: 1.0, Shm: 1.3}}
	drive(t, l, m, size, 20)
	m.cost[CMA] = 2.0
	seq := drive(t, l, m, size, 40)
	// Settled since message 8, cold message at 8, 11 counted samples at
	// 1.0 up to message 19. At 2.0 the running cost passes 1.5 on the 6th
	// sample (1 + 1 - (7/8)^6 = 1.55): messages 20-25, then a round:
	// cma 26-29, shm 30-33, settled on shm from 34.
	for i, b := range seq {
		want := CMA
		if i >= 10 {
			want = Shm
		}
		if b != want {
			t.Fatalf("message %d after the change went by %s, want %s: %v", 20+i, b, want, seq)
		}
	}
	if s := l.State(size); s.Best != Shm || s.Switches != 1 || s.Rounds != 2 {
		t.Fatalf("state %+v, want shm after 2 rounds, 1 switch", s)
	}
}

// The machine changes the other way: another method becomes faster; the
// next periodic re-check finds it, at the exact count.
func TestLearnerFindsAFasterCandidateAtRecheck(t *testing.T) {
	const size = 1 << 20
	l := newTestLearner(t, tableFrom(16<<10, CMA), CMA, Shm)
	m := &machine{cost: map[Backend]float64{CMA: 1.0, Shm: 1.3}}
	drive(t, l, m, size, 8)
	m.cost[Shm] = 0.5
	seq := drive(t, l, m, size, 80)
	// Cold cma + 64 counted (0-64), round: cma 65-68, shm 69-72, then shm.
	for i, b := range seq {
		want := CMA
		if i >= 69 {
			want = Shm
		}
		if b != want {
			t.Fatalf("message %d went by %s, want %s", 8+i, b, want)
		}
	}
	// Shm ran last in the round: its 7 messages since (73-79) count.
	if s := l.State(size); s.Best != Shm || s.Switches != 1 || s.NextRecheck != LearnerRecheck-7 {
		t.Fatalf("state %+v, want shm, 1 switch, next re-check in %d", s, LearnerRecheck-7)
	}
}

// The eager path competes with the LMT backends where a message may take
// either, and only there.
func TestLearnerEagerCompetes(t *testing.T) {
	tab := tableFrom(64<<10, CMA) // the formula: eager below 64 KiB
	l := newTestLearner(t, tab, Eager, CMA, Shm)
	m := &machine{cost: map[Backend]float64{Eager: 0.08, CMA: 0.05, Shm: 0.12}}
	seq := drive(t, l, m, 16<<10, 12+10)
	if seq[0] != Eager {
		t.Fatalf("16 KiB started by %s, want eager (the table's choice)", seq[0])
	}
	if s := l.State(16 << 10); s.Best != CMA || !s.Settled {
		t.Fatalf("16 KiB: %+v, want settled on cma (eager 1.6x slower)", s)
	}
	m.cost[Eager] = 0.02 // eager 2.5x faster at 8 KiB
	drive(t, l, m, 8<<10, 20)
	if s := l.State(8 << 10); s.Best != Eager {
		t.Fatalf("8 KiB: %+v, want eager", s)
	}
	// 2 KiB is below lmtFrom: eager only, settled at once.
	if seq := drive(t, l, m, 2<<10, 5); changes(seq) != 0 || seq[0] != Eager {
		t.Fatalf("2 KiB went by %v, want eager only", seq)
	}
	// 64 KiB-128 KiB is past the eager limit: never eager.
	for _, b := range drive(t, l, m, 100<<10, 40) {
		if b == Eager {
			t.Fatal("a 100 KiB message went eagerly past the 64 KiB limit")
		}
	}
}

func TestLearnerIgnoresStraySamples(t *testing.T) {
	const size = 1 << 20
	l := newTestLearner(t, tableFrom(16<<10, CMA), CMA, Shm)
	m := &machine{cost: map[Backend]float64{CMA: 1.0, Shm: 2.0}}
	drive(t, l, m, size, 8)
	before := l.State(size)
	for range 100 { // a forced backend's messages, and bad input
		l.Record(size, l.Index(Shm), time.Millisecond)
		l.Record(size, 7, time.Millisecond)
		l.Record(size, -1, time.Millisecond)
		l.Record(0, 0, time.Millisecond)
		l.Record(size, 0, -time.Second)
	}
	if after := l.State(size); after.NextRecheck != before.NextRecheck || after.Best != CMA {
		t.Fatalf("stray samples moved the state: %+v, then %+v", before, after)
	}
}

func TestNewLearnerErrors(t *testing.T) {
	tab := tableFrom(16<<10, CMA)
	if _, err := NewLearner(nil, nil, 0, 0); err == nil {
		t.Error("NewLearner(nil table) succeeded")
	}
	if _, err := NewLearner(tab, []Backend{"dma-magic"}, 0, 0); err == nil || err.Error() != `threshold: NewLearner: "dma-magic" is not a transfer method` {
		t.Errorf("bad candidate: %v", err)
	}
}

func TestLearnerAllocatesNothing(t *testing.T) {
	l := newTestLearner(t, tableFrom(16<<10, CMA), Eager, CMA, Shm, CMASplit)
	size := int64(32 << 10)
	if n := testing.AllocsPerRun(1000, func() {
		b := l.Choose(size)
		l.Record(size, l.Index(b), time.Microsecond)
		size = size*3%(8<<20) + 4096
	}); n != 0 {
		t.Fatalf("Choose+Record: %v allocations per message, want 0", n)
	}
}

func BenchmarkLearner(b *testing.B) {
	tab := tableFrom(16<<10, CMA)
	l, err := NewLearner(tab, []Backend{Eager, CMA, Shm, CMASplit}, 64<<10, 4<<10-1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	size := int64(32 << 10)
	for i := 0; b.Loop(); i++ {
		c := l.Choose(size)
		l.Record(size, l.Index(c), time.Duration(1000+i%7))
	}
}

// Every method a peer may have, as package auto gives them, and a tuned
// table whose own choice (pipe) adds a ninth: multirail, the cheapest at
// 16 MiB by 12% over cma-split under ±4% noise, wins the first round and
// keeps the class through every re-check, in this exact sequence: each
// round measures every eligible method, one cold message and
// LearnerSamples counted each (the incumbent first, then by index), and
// the settled one runs a cold message when another ran last, then
// LearnerRecheck counted messages, doubling after each round it holds.
func TestLearnerSettlesOnMultiRail(t *testing.T) {
	const size = 16 << 20
	cands := []Backend{Eager, Shm, CMA, CMASplit, MultiRail, Vmsplice, Knem, ArenaCopy}
	l := newTestLearner(t, tableFrom(64<<10, Pipe), cands...)
	if got := l.Candidates(); len(got) != 9 || got[8] != Pipe {
		t.Fatalf("candidates %v, want the 8 given and the table's pipe", got)
	}
	m := &machine{cost: map[Backend]float64{MultiRail: 0.100, CMASplit: 0.112, CMA: 0.2, Knem: 0.21,
		Vmsplice: 0.25, Shm: 0.3, Pipe: 0.5, Eager: 0.05, ArenaCopy: 0.01},
		noise: []float64{1.04, 0.96, 1.0, 0.97, 1.03}}
	seq := drive(t, l, m, size, 3000)

	// Past the 64 KiB eager limit and arena-copy's 256 KiB slots, 7
	// methods are eligible. A re-check measures multirail and cma-split,
	// the only one within LearnerContender of it; every
	// LearnerFullRound-th re-check measures all 7.
	others := []Backend{Shm, CMA, CMASplit, Vmsplice, Knem, Pipe}
	var want []Backend
	rounds := 0
	round := func(order ...Backend) {
		for _, b := range order {
			for range 1 + LearnerSamples {
				want = append(want, b)
			}
		}
		if len(want) <= len(seq) {
			rounds++
		}
	}
	round(Pipe, Shm, CMA, CMASplit, MultiRail, Vmsplice, Knem)
	for re, interval := 1, LearnerRecheck; len(want) < len(seq); re, interval = re+1, min(2*interval, LearnerRecheckMax) {
		for range 1 + interval { // cold, then counted
			want = append(want, MultiRail)
		}
		if re%LearnerFullRound == 0 {
			round(append([]Backend{MultiRail}, others...)...)
		} else {
			round(MultiRail, CMASplit)
		}
	}
	for i := range seq {
		if seq[i] != want[i] {
			t.Fatalf("message %d went by %s, want %s:\n got %v\nwant %v", i, seq[i], want[i], seq[:i+1], want[:i+1])
		}
	}
	s := l.State(size)
	if !s.Settled || s.Best != MultiRail || s.Switches != 0 || int(s.Rounds) != rounds {
		t.Fatalf("state %+v: want settled on multirail after %d rounds, 0 switches", s, rounds)
	}
	if c := s.Costs[l.Index(MultiRail)]; c < 0.096 || c > 0.104 {
		t.Fatalf("multirail's cost %v ns/B, want the median of its samples, within the ±4%% noise of 0.1", c)
	}
	// The far slower methods ran in the first round and the full re-check
	// only: 2 rounds of 4 messages each.
	if n := count(seq, Pipe); n != 2*(1+LearnerSamples) {
		t.Fatalf("pipe (5 times slower) took %d of %d messages, want %d (two full rounds)", n, len(seq), 2*(1+LearnerSamples))
	}
}

// count counts the messages sent by b.
func count(seq []Backend, b Backend) int {
	n := 0
	for _, x := range seq {
		if x == b {
			n++
		}
	}
	return n
}
