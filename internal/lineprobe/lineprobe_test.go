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

func pair(w *words, call uint16, rounds int, deadline time.Time) (lead, follow Run) {
	lead = Run{Mine: &w.a, Theirs: &w.b, Call: call, Me: 0, Peer: 1, Lead: true, Rounds: rounds, Deadline: deadline}
	follow = Run{Mine: &w.b, Theirs: &w.a, Call: call, Me: 1, Peer: 0, Rounds: rounds, Deadline: deadline}
	return lead, follow
}

type result struct {
	d     time.Duration
	timed int
	ok    bool
}

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
		lead, follow := pair(&w, call, 256, time.Now().Add(10*time.Second))
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
// (they yield to each other instead of spinning out their time slices),
// and the line they measure is the context switch's, well above what any
// two CPUs sharing a cache show.
func TestMeasureOneCPU(t *testing.T) {
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		t.Fatal(err)
	}
	cpu := 0
	for !mask.IsSet(cpu) {
		cpu++
	}
	var one unix.CPUSet
	one.Set(cpu)
	pinned := func(r Run, res *result, done *sync.WaitGroup) {
		defer done.Done()
		runtime.LockOSThread() // the thread ends with the goroutine
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			res.d = -1
			return
		}
		res.d, res.timed, res.ok = r.Measure()
	}
	var w words
	lead, follow := pair(&w, 1, 2048, time.Now().Add(2*time.Second))
	var l, f result
	var wg sync.WaitGroup
	wg.Add(2)
	go pinned(lead, &l, &wg)
	go pinned(follow, &f, &wg)
	wg.Wait()
	if !l.ok || !f.ok {
		t.Fatalf("on cpu%d alone: leader %+v, follower %+v; want both ok within the deadline", cpu, l, f)
	}
	t.Logf("cpu%d alone: %v one way", cpu, l.d)
	if l.d < time.Microsecond/2 {
		t.Fatalf("on cpu%d alone the line took %v one way; a context switch each way takes far longer than a cache line", cpu, l.d)
	}
}

// TestMeasureAbsentPeer: a side whose partner never comes returns not ok
// once its deadline has passed, having timed nothing.
func TestMeasureAbsentPeer(t *testing.T) {
	for _, leads := range []bool{true, false} {
		var w words
		start := time.Now()
		lead, follow := pair(&w, 1, 64, start.Add(20*time.Millisecond))
		r := lead
		if !leads {
			r = follow
		}
		d, timed, ok := r.Measure()
		if ok || d != 0 || timed != 0 {
			t.Fatalf("lead=%v alone: got %v, %d batches, ok=%v; want 0, 0, false", leads, d, timed, ok)
		}
		if el := time.Since(start); el < 20*time.Millisecond {
			t.Fatalf("lead=%v alone returned after %v, before its deadline", leads, el)
		}
	}
}

// TestMeasureStaleAnswer: a follower whose word still holds its answer to
// the previous probe must not be taken as ready for this one.
func TestMeasureStaleAnswer(t *testing.T) {
	var w words
	w.b.Store(uint64(1)<<48 | 1<<32 | 64) // the follower's last answer of call 1
	lead, _ := pair(&w, 2, 64, time.Now().Add(20*time.Millisecond))
	if d, timed, ok := lead.Measure(); ok {
		t.Fatalf("leader of call 2 measured %v over %d batches against a stale word", d, timed)
	}
}
