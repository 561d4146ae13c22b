package lineprobe

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// words gives each side a word on a 128-byte block of its own, as the
// callers' shared memory does.
type words struct {
	a atomic.Uint64
	_ [120]byte
	b atomic.Uint64
}

func pair(w *words, call uint16, rounds int, stall time.Duration) (lead, follow Run) {
	lead = Run{Mine: &w.a, Theirs: &w.b, Call: call, Me: 0, Peer: 1, Lead: true, Rounds: rounds, Stall: stall}
	follow = Run{Mine: &w.b, Theirs: &w.a, Call: call, Me: 1, Peer: 0, Rounds: rounds, Stall: stall}
	return lead, follow
}

type result struct {
	d     time.Duration
	timed int
	ok    bool
}

// unhurried is a stall no machine reaches while both sides run: the tests
// wait for the probe however slow an oversubscribed machine makes it
// (TestMeasureAbsentPeer tests the stall itself).
func unhurried() time.Duration { return time.Hour }

func measureBoth(lead, follow Run) (l, f result) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.d, f.timed, f.ok = follow.Measure()
	}()
	l.d, l.timed, l.ok = lead.Measure()
	wg.Wait()
	return l, f
}

// TestMeasure: two goroutines probe three times in a row on the same words,
// as a pair of ranks re-probing does, and every probe times its batches.
func TestMeasure(t *testing.T) {
	var w words
	for call := uint16(1); call <= 3; call++ {
		lead, follow := pair(&w, call, 256, unhurried())
		l, f := measureBoth(lead, follow)
		if !l.ok || !f.ok {
			t.Fatalf("probe %d: leader %+v, follower %+v; want both ok", call, l, f)
		}
		if l.d <= 0 || f.d <= 0 {
			t.Fatalf("probe %d: one-way times %v and %v, want positive", call, l.d, f.d)
		}
		// 256 rounds are 32 batches; the leader may leave its last
		// one untimed (see lead), the follower times the 31 between
		// its 32 answers.
		if l.timed < 31 || l.timed > 32 || f.timed != 31 {
			t.Fatalf("probe %d: leader timed %d batches, follower %d; want 31-32 and 31", call, l.timed, f.timed)
		}
	}
}

// TestMeasureOneCPU: two sides whose threads share one CPU still finish
// (they yield to each other instead of spinning out their time slices)
// and time every batch. How long the line takes there, against two CPUs,
// is BenchmarkMeasureOneCPU's figure, not a test's.
func TestMeasureOneCPU(t *testing.T) {
	l, f, cpu := measureOnOneCPU(t, unhurried())
	if !l.ok || !f.ok || l.d <= 0 || f.d <= 0 {
		t.Fatalf("on cpu%d alone: leader %+v, follower %+v; want both ok, with positive times", cpu, l, f)
	}
	if l.timed < 255 || l.timed > 256 || f.timed != 255 {
		t.Fatalf("on cpu%d alone: leader timed %d batches, follower %d; want 255-256 and 255", cpu, l.timed, f.timed)
	}
	t.Logf("cpu%d alone: %v one way", cpu, l.d)
}

// measureOnOneCPU runs a probe of 2048 rounds with both sides pinned to
// the first CPU this process may use.
func measureOnOneCPU(tb testing.TB, stall time.Duration) (l, f result, cpu int) {
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		tb.Fatal(err)
	}
	for !mask.IsSet(cpu) {
		cpu++
	}
	var one unix.CPUSet
	one.Set(cpu)
	var errs [2]error
	pinned := func(r Run, res *result, err *error, done *sync.WaitGroup) {
		defer done.Done()
		runtime.LockOSThread() // the thread ends with the goroutine
		if *err = unix.SchedSetaffinity(0, &one); *err != nil {
			return
		}
		res.d, res.timed, res.ok = r.Measure()
	}
	var w words
	lead, follow := pair(&w, 1, 2048, stall)
	var wg sync.WaitGroup
	wg.Add(2)
	go pinned(lead, &l, &errs[0], &wg)
	go pinned(follow, &f, &errs[1], &wg)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatalf("pinning a side to cpu%d: %v", cpu, err)
		}
	}
	return l, f, cpu
}

// BenchmarkMeasureOneCPU: the one-way time a probe measures with both
// sides on one CPU (a context switch each way), beside the same probe on
// whatever CPUs the scheduler gives (two, on an idle machine with two):
// compare the two ns/oneway figures as a ratio.
func BenchmarkMeasureOneCPU(b *testing.B) {
	b.Run("one-cpu", func(b *testing.B) {
		var sum time.Duration
		for range b.N {
			l, f, cpu := measureOnOneCPU(b, unhurried())
			if !l.ok || !f.ok {
				b.Fatalf("on cpu%d alone: leader %+v, follower %+v", cpu, l, f)
			}
			sum += l.d
		}
		b.ReportMetric(float64(sum.Nanoseconds())/float64(b.N), "ns/oneway")
	})
	b.Run("any-cpus", func(b *testing.B) {
		var sum time.Duration
		for i := range b.N {
			var w words
			lead, follow := pair(&w, uint16(i%60000+1), 2048, unhurried())
			l, f := measureBoth(lead, follow)
			if !l.ok || !f.ok {
				b.Fatalf("leader %+v, follower %+v", l, f)
			}
			sum += l.d
		}
		b.ReportMetric(float64(sum.Nanoseconds())/float64(b.N), "ns/oneway")
	})
}

// TestMeasureAbsentPeer: a side whose partner never comes returns not ok
// once the partner's word has stayed the same for the stall, having timed
// nothing.
func TestMeasureAbsentPeer(t *testing.T) {
	for _, leads := range []bool{true, false} {
		var w words
		start := time.Now()
		lead, follow := pair(&w, 1, 64, 20*time.Millisecond)
		r := lead
		if !leads {
			r = follow
		}
		d, timed, ok := r.Measure()
		if ok || d != 0 || timed != 0 {
			t.Fatalf("lead=%v alone: got %v, %d batches, ok=%v; want 0, 0, false", leads, d, timed, ok)
		}
		if el := time.Since(start); el < 20*time.Millisecond {
			t.Fatalf("lead=%v alone returned after %v, before its stall", leads, el)
		}
	}
}

// TestMeasureStaleAnswer: a follower whose word still holds its answer to
// the previous probe must not be taken as ready for this one.
func TestMeasureStaleAnswer(t *testing.T) {
	var w words
	w.b.Store(uint64(1)<<48 | 1<<32 | 64) // the follower's last answer of call 1
	lead, _ := pair(&w, 2, 64, 20*time.Millisecond)
	if d, timed, ok := lead.Measure(); ok {
		t.Fatalf("leader of call 2 measured %v over %d batches against a stale word", d, timed)
	}
}

// TestMeasureSlowPeerIsWaitedFor: a follower that answers every round, but
// only after a pause, keeps the leader waiting past the stall as a whole
// (16 pauses of a tenth of the stall), and the leader still times its
// batches: only a word that stops changing ends a probe.
func TestMeasureSlowPeerIsWaitedFor(t *testing.T) {
	const rounds, stall = 16, time.Second
	var w words
	lead, _ := pair(&w, 1, rounds, stall)
	answer := func(k uint64) { w.b.Store(uint64(1)<<48 | 1<<32 | k) }
	go func() {
		answer(0)
		for k := uint64(1); k <= rounds; k++ {
			for w.a.Load() != uint64(1)<<48|2<<32|k {
				runtime.Gosched()
			}
			time.Sleep(stall / 10)
			answer(k)
		}
	}()
	start := time.Now()
	d, timed, ok := lead.Measure()
	if !ok || timed == 0 || d <= 0 {
		t.Fatalf("leader with a slow follower, after %v: %v over %d batches, ok=%v; want a reading", time.Since(start), d, timed, ok)
	}
}
