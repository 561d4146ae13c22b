package fastclock

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestNanotimeTracksTheRuntimeClock: an interval Nanotime measures inside
// one time.Now measures (and around a 50 ms sleep) is no longer than the
// outer one and no shorter than the sleep, give or take the calibration's
// error. Nesting, not closeness, and no speed: a preemption or a slow
// machine lengthens the outer interval only, and the error allowed is the
// most the calibration can make by construction (each of its two stamps
// within stampSlack, over the calibration interval), not a figure of this
// machine.
func TestNanotimeTracksTheRuntimeClock(t *testing.T) {
	t.Logf("source: %s", Source())
	const sleep = 50 * time.Millisecond
	s0, n0 := time.Now(), Nanotime()
	time.Sleep(sleep)
	n1, s1 := Nanotime(), time.Now()
	inner, outer := time.Duration(n1-n0), s1.Sub(s0)
	// Rate error ≤ 2·stampSlack/calibration, applied to each interval.
	slack := func(d time.Duration) time.Duration { return d * 2 * stampSlack / calibration }
	if inner > outer+slack(outer) || inner < sleep-slack(sleep) {
		t.Fatalf("Nanotime measured %v inside a time.Now interval of %v around a %v sleep (calibration error allowed: %v)", inner, outer, sleep, slack(outer))
	}
}

// TestScale: the fixed-point rate and its use, on counters of known
// frequency: exact where the rate is, within a nanosecond per second
// where it is not.
func TestScale(t *testing.T) {
	for _, c := range []struct {
		name    string
		elapsed time.Duration // calibration interval
		ticks   uint64        // counted over it
		convert uint64        // ticks to convert
		want    int64         // nanoseconds, worked out by hand
		slack   int64
	}{
		{"2.5 GHz, 1 s", 2 * time.Millisecond, 5_000_000, 2_500_000_000, 1_000_000_000, 1},
		{"2.5 GHz, 1 day", 2 * time.Millisecond, 5_000_000, 216_000_000_000_000, 86_400_000_000_000, 86_400},
		{"1 GHz, exact", 2 * time.Millisecond, 2_000_000, 123_456_789, 123_456_789, 0},
		{"3 GHz, 1 s", 2 * time.Millisecond, 6_000_000, 3_000_000_000, 1_000_000_000, 1},
		{"zero ticks", 2 * time.Millisecond, 5_000_000, 0, 0, 0},
	} {
		got := scale(c.convert, rate(c.elapsed, c.ticks))
		if d := got - c.want; d > c.slack || d < -c.slack {
			t.Errorf("%s: %d ticks = %d ns, want %d ± %d", c.name, c.convert, got, c.want, c.slack)
		}
	}
}

// TestNanotimeNeverGoesBack: successive readings never decrease, also
// across goroutines the scheduler moves between CPUs.
func TestNanotimeNeverGoesBack(t *testing.T) {
	done := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			last := Nanotime()
			for i := 0; i < 200000; i++ {
				now := Nanotime()
				if now < last {
					done <- fmt.Errorf("Nanotime went from %d back to %d", last, now)
					return
				}
				last = now
			}
			done <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestTSCOnlyWhereTheKernelKeepsTimeWithIt: the counter is trusted only
// when the kernel's clocksource is "tsc".
func TestTSCOnlyWhereTheKernelKeepsTimeWithIt(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		content string
		want    bool
	}{{"tsc\n", true}, {"kvm-clock\n", false}, {"hpet\n", false}, {"", false}} {
		p := filepath.Join(dir, "cs")
		if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := kernelUsesTSC(p); got != c.want {
			t.Errorf("clocksource %q: kernelUsesTSC = %v, want %v", c.content, got, c.want)
		}
	}
	if kernelUsesTSC(filepath.Join(dir, "missing")) {
		t.Error("an unreadable clocksource file counts as tsc")
	}
	want := "runtime"
	if haveTSC && kernelUsesTSC(clocksourceFile) {
		want = "tsc"
	}
	if got := Source(); got != want {
		t.Errorf("Source() = %q, want %q on this machine", got, want)
	}
}

func BenchmarkNanotime(b *testing.B) {
	for b.Loop() {
		Nanotime()
	}
}

func BenchmarkTimeSince(b *testing.B) {
	for b.Loop() {
		_ = time.Since(origin)
	}
}
