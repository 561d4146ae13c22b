package threshold

import (
	"math"
	"slices"
	"testing"
	"time"
)

func shmTable() *Table {
	return &Table{
		LMTMin: Threshold{Bytes: 64 << 10},
		Rules:  []Rule{{From: 64 << 10, Backend: Shm}, {From: 16 << 20, Backend: Knem, DMA: true}},
	}
}

// shmFirst is an Adaptive over a table sending everything from 64 KiB to
// shm, weighing cands besides.
func shmFirst(t *testing.T, cands ...Backend) *Adaptive {
	t.Helper()
	a, err := NewAdaptive(&Table{LMTMin: Threshold{Bytes: 64 << 10}, Rules: []Rule{{From: 64 << 10, Backend: Shm}}}, cands)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run sends n messages of size through a, each taking cost[backend] ns per
// byte, and returns how many went by each backend.
func run(a *Adaptive, n int, size int64, cost map[Backend]float64) map[Backend]int {
	used := map[Backend]int{}
	for range n {
		c := a.Choose(size)
		used[c.Backend]++
		a.Observe(string(c.Backend), size, time.Duration(cost[c.Backend]*float64(size)))
	}
	return used
}

func TestAdaptiveLearnsAndFollows(t *testing.T) {
	a, err := NewAdaptive(shmTable(), []Backend{CMA, Vmsplice})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Candidates(); len(got) != 4 || got[0] != Shm || got[1] != Knem || got[2] != CMA || got[3] != Vmsplice {
		t.Fatalf("candidates %v, want [shm knem cma vmsplice]", got)
	}
	const size = 1 << 20
	// The table's choice until a quarter of 64 MiB has passed (the first
	// exploration comes four times sooner); then one candidate in turn is
	// measured with two messages, the first of which only warms it up.
	// Later cycles are 64 MiB: 64 messages plus the second.
	near := map[Backend]float64{Shm: 0.05, CMA: 0.12, Vmsplice: 0.08, Knem: 0.2}
	if used := run(a, 16, size, near); used[Shm] != 16 {
		t.Fatalf("first 16 messages: %v, want all by the table's shm", used)
	}
	if used := run(a, 3*65, size, near); used[Knem] != 2 || used[CMA] != 2 || used[Vmsplice] != 2 {
		t.Fatalf("next messages: %v, want two by each other candidate", used)
	}
	for i, c := range a.Costs(size) {
		if want := near[a.Candidates()[i]]; math.Abs(c-want) > 1e-6 {
			t.Fatalf("costs %v, want each candidate's %v", a.Costs(size), near)
		}
	}
	// Then the cheapest. Each candidate is explored every
	// explorePeriod cycles: vmsplice (1.6x) every 7th, cma (2.4x) and
	// knem (4x) every 12th, so these 10 cycles see three explorations of 2.
	used := run(a, 650, size, near)
	if used[Shm] != 650-6 || used[Vmsplice] != 4 || used[CMA]+used[Knem] != 2 {
		t.Fatalf("steady state near: %v, want 644 shm, vmsplice twice and cma or knem once, each for 2 messages", used)
	}
	// The placement changes: shm now costs three times more than
	// vmsplice. Within a few explorations the choice follows.
	far := map[Backend]float64{Shm: 0.18, CMA: 0.14, Vmsplice: 0.10, Knem: 0.2}
	run(a, 3*65*3, size, far)
	if used := run(a, 65, size, far); used[Vmsplice] < 63 {
		t.Fatalf("after the change: %v (costs %v), want vmsplice but for one exploration at most", used, a.Costs(size))
	}
	// Other size classes learn on their own.
	if c := a.Choose(128 << 10); c.Backend != Shm {
		t.Errorf("untouched class chose %v, want the table's shm", c.Backend)
	}
}

func TestAdaptiveLeavesEagerAndDMAToTheTable(t *testing.T) {
	a, err := NewAdaptive(shmTable(), []Backend{CMA})
	if err != nil {
		t.Fatal(err)
	}
	a.MinSize = 256 << 10
	for range 100 {
		c := a.Choose(128 << 10)
		if c.Backend != Shm {
			t.Fatalf("128 KiB, below MinSize: %+v, want the table's shm", c)
		}
		a.Observe(string(c.Backend), 128<<10, time.Second) // ignored: below MinSize
	}
	for range 100 {
		if c := a.Choose(4 << 10); !c.Eager {
			t.Fatalf("4 KiB: %+v, want eager", c)
		}
		if c := a.Choose(32 << 20); c.Backend != Knem || !c.DMA {
			t.Fatalf("32 MiB: %+v, want the table's knem with DMA", c)
		}
	}
}

// A candidate whose messages never complete as itself (the receiver fell
// back to another backend) stays unmeasured and is only tried on the
// exploration schedule, two messages per cycle shared with the others.
func TestAdaptiveUnmeasuredCandidateCostsOnlyExplorations(t *testing.T) {
	a, err := NewAdaptive(shmTable(), []Backend{CMA})
	if err != nil {
		t.Fatal(err)
	}
	tries := 0
	for range 20*65 + 1 {
		c := a.Choose(1 << 20)
		if c.Backend == CMA {
			tries++
			a.Observe("shm", 1<<20, 50*time.Microsecond) // carried by the fallback
			continue
		}
		a.Observe(string(c.Backend), 1<<20, 50*time.Microsecond)
	}
	// 20 cycles of 65 messages, the rotation taking knem and cma in turn.
	if tries != 20 {
		t.Errorf("cma tried %d times, want 20 (10 explorations of 2)", tries)
	}
}

func TestAdaptiveErrors(t *testing.T) {
	if _, err := NewAdaptive(nil, nil); err == nil {
		t.Error("nil table accepted")
	}
	if _, err := NewAdaptive(shmTable(), []Backend{"dma"}); err == nil || err.Error() != `threshold: "dma" is not an LMT backend` {
		t.Errorf("unknown backend: %v", err)
	}
	if _, err := NewAdaptive(shmTable(), []Backend{Eager}); err == nil {
		t.Error("eager accepted as a candidate")
	}
	if _, err := NewAdaptive(&Table{}, nil); err == nil || err.Error() != "threshold: NewAdaptive: no candidate backend" {
		t.Errorf("no candidates: %v", err)
	}
}

func TestAdaptiveAllocatesNothing(t *testing.T) {
	a, err := NewAdaptive(shmTable(), []Backend{CMA, Vmsplice})
	if err != nil {
		t.Fatal(err)
	}
	size := int64(1 << 20)
	if n := testing.AllocsPerRun(1000, func() {
		c := a.Choose(size)
		a.Observe(string(c.Backend), size, 60*time.Microsecond)
	}); n != 0 {
		t.Errorf("Choose+Observe: %v allocations, want 0", n)
	}
}

// A backend is slow on its first message after others were used (its ring
// or pipe has left the caches): explorations are not held to that message,
// and the one in use keeps its place.
func TestAdaptiveIgnoresColdFirstMessage(t *testing.T) {
	a := shmFirst(t, CMASplit, Vmsplice)
	a.ExploreEvery, a.ExploreBytes = 64, 0 // by message count only
	const size = 64 << 10
	// Candidates close to shm are explored every cycle (explorePeriod).
	cost := map[Backend]float64{Shm: 0.03, CMASplit: 0.032, Vmsplice: 0.032}
	var last Backend
	used := map[Backend]int{}
	for n := range 1000 {
		c := a.Choose(size)
		x := cost[c.Backend]
		if c.Backend != last {
			x *= 40 // cold
		}
		last = c.Backend
		a.Observe(string(c.Backend), size, time.Duration(x*size))
		if n >= 360 {
			used[c.Backend]++
		}
	}
	if n := 640 - used[Shm]; n < 18 || n > 20 || n%2 != 0 {
		t.Errorf("last 640 messages: %v (costs %v), want shm but for 9 or 10 explorations of 2", used, a.Costs(size))
	}
}

// Small messages explore less often: an exploration costs them a cold
// message twice, so it waits for ExploreBytes to pass as well.
func TestAdaptiveExploresByBytes(t *testing.T) {
	a := shmFirst(t, CMASplit)
	cost := map[Backend]float64{Shm: 0.03, CMASplit: 0.032} // explored every cycle
	run(a, 100, 64<<10, cost)
	// 64 MiB in 64 KiB messages: one exploration per 1024 messages.
	if used := run(a, 4096, 64<<10, cost); used[CMASplit] != 8 {
		t.Errorf("4096 messages of 64 KiB: %v, want 4 explorations of 2", used)
	}
}

// One preempted message does not hand the class to a slower backend.
func TestAdaptiveShrugsOffOneOutlier(t *testing.T) {
	a := shmFirst(t, CMASplit)
	const size = 1 << 20
	cost := map[Backend]float64{Shm: 0.05, CMASplit: 0.08}
	run(a, 100, size, cost)
	if c := a.Choose(size); c.Backend != Shm {
		t.Fatalf("before the outlier: %v", c.Backend)
	}
	a.Observe("shm", size, time.Duration(50*0.05*size)) // preempted
	if c := a.Choose(size); c.Backend != Shm {
		t.Errorf("after one message 50 times slower: %v (costs %v), want shm still", c.Backend, a.Costs(size))
	}
}

// Large messages pass 64 MiB quickly: their class explores every
// ExploreEvery (24) messages, the first time after 6, so it adapts within
// a few messages.
func TestAdaptiveLargeMessagesExploreByCount(t *testing.T) {
	a := shmFirst(t, CMASplit)
	const size = 16 << 20
	far := map[Backend]float64{Shm: 0.18, CMASplit: 0.075}
	if used := run(a, 6, size, far); used[Shm] != 6 {
		t.Fatalf("first 6 messages: %v, want the table's shm", used)
	}
	// shm, displaced on one look at cma-split, is looked at again
	// ExploreEvery/4 messages later (two messages), then left alone.
	if used := run(a, 25, size, far); used[CMASplit] != 23 || used[Shm] != 2 {
		t.Errorf("next 25 messages: %v (costs %v), want cma-split measured at once and kept, shm rechecked once", used, a.Costs(size))
	}
	if used := run(a, 25, size, far); used[CMASplit] != 25 {
		t.Errorf("next 25 messages: %v (costs %v), want cma-split", used, a.Costs(size))
	}
}

// A disturbance of a few messages raises the best's mean past another
// candidate's older figure, and the class goes to that one. The displaced
// best is measured again ExploreEvery/4 messages later and, as cheap as
// before, takes the class back: without the recheck it waited for its next
// exploration, 512 messages at 128 KiB (seen in lmtbench: auto at 0.64 of
// shm over a 15 ms sample).
func TestAdaptiveRechecksADisplacedBest(t *testing.T) {
	a := shmFirst(t, Vmsplice)
	const size = 128 << 10
	calm := map[Backend]float64{Shm: 0.045, Vmsplice: 0.08}
	if used := run(a, 1000, size, calm); used[Vmsplice] != 2 {
		t.Fatalf("calm: %v, want vmsplice explored once", used)
	}
	disturbed := map[Backend]float64{Shm: 0.2, Vmsplice: 0.08}
	if used := run(a, 8, size, disturbed); used[Vmsplice] == 0 {
		t.Fatalf("disturbed: %v (costs %v), want the class handed to vmsplice", used, a.Costs(size))
	}
	if used := run(a, int(a.ExploreEvery/4+2), size, calm); used[Shm] < 2 {
		t.Fatalf("after the disturbance: %v (costs %v), want shm measured again", used, a.Costs(size))
	}
	if used := run(a, 50, size, calm); used[Shm] != 50 {
		t.Errorf("then: %v (costs %v), want shm back, vmsplice not rechecked in turn", used, a.Costs(size))
	}
}

// The first round of explorations runs back to back: after the table's
// first six messages, two by each candidate never tried, then the cheapest.
// A candidate whose measurement has not come back yet (a stream with many
// messages in flight) is not explored again before its turn.
func TestAdaptiveFirstRoundBackToBack(t *testing.T) {
	a := shmFirst(t, CMASplit, Vmsplice)
	const size = 4 << 20
	var got []Backend
	for range 12 {
		got = append(got, a.Choose(size).Backend) // no Observe: all in flight
	}
	want := []Backend{Shm, Shm, Shm, Shm, Shm, Shm, CMASplit, CMASplit, Vmsplice, Vmsplice, Shm, Shm}
	if !slices.Equal(got, want) {
		t.Fatalf("first 12 messages, none measured yet: %v, want %v", got, want)
	}
	b := shmFirst(t, CMASplit, Vmsplice)
	cost := map[Backend]float64{Shm: 0.047, CMASplit: 0.075, Vmsplice: 0.085}
	if used := run(b, 34, size, cost); used[CMASplit] != 2 || used[Vmsplice] != 2 {
		t.Fatalf("first 34 messages: %v, want each candidate twice", used)
	}
	for i, c := range b.Costs(size) {
		if want := cost[b.Candidates()[i]]; math.Abs(c-want) > 1e-6 {
			t.Fatalf("costs after the first round %v, want %v", b.Costs(size), cost)
		}
	}
}

// A candidate measured at 2.16 times the best's cost is re-measured one
// cycle in twelve (explorePeriod), and still found within twelve cycles
// when the best slows down.
func TestAdaptiveExploresFarWorseCandidatesLess(t *testing.T) {
	a := shmFirst(t, CMASplit)
	const size = 4 << 20
	far := map[Backend]float64{Shm: 0.16, CMASplit: 0.074}
	run(a, 200, size, far) // settles on cma-split, shm measured at 2.2x
	if used := run(a, 25*16, size, far); used[Shm] != 2*1 && used[Shm] != 2*2 {
		t.Errorf("16 cycles: %v, want shm re-measured in 1 or 2 of them", used)
	}
	// The placement changes: now cma-split is the slow one. shm is
	// re-measured within 12 cycles and takes over.
	near := map[Backend]float64{Shm: 0.047, CMASplit: 0.14}
	run(a, 25*12, size, near)
	if used := run(a, 25, size, near); used[Shm] < 23 {
		t.Errorf("after the change: %v (costs %v), want shm", used, a.Costs(size))
	}
}

func TestExplorePeriod(t *testing.T) {
	for _, c := range []struct {
		cost, best float64
		want       uint32
	}{
		{0, 1, 1},    // never measured: at once
		{0.9, 1, 1},  // cheaper than the best (stale): at once
		{1.05, 1, 1}, // within 10%: every cycle
		{1.1, 1, 2},
		{1.4, 1, 5},  // cma-split against shm, near, 1 MiB
		{1.8, 1, 9},  // cma-split against shm, near, 4 MiB
		{2.2, 1, 12}, // shm against cma-split, far
		{4, 1, 12},   // capped: a faster candidate is never unseen for long
		{1, 0, 1},    // no best measured yet
	} {
		if got := explorePeriod(c.cost, c.best); got != c.want {
			t.Errorf("explorePeriod(%v, %v) = %d, want %d", c.cost, c.best, got, c.want)
		}
	}
}
