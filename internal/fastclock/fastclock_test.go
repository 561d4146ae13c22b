package fastclock

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestNanotimeTracksTheRuntimeClock: over 50 ms, the durations Nanotime
// measures agree with time.Since to within 0.5% (the calibration errs by
// parts in 100000; the slack is for a preemption between the two reads).
func TestNanotimeTracksTheRuntimeClock(t *testing.T) {
	t.Logf("source: %s", Source())
	for try := 0; ; try++ {
		s0, n0 := time.Now(), Nanotime()
		time.Sleep(50 * time.Millisecond)
		n1, s1 := Nanotime(), time.Now()
		got, want := time.Duration(n1-n0), s1.Sub(s0)
		if (got - want).Abs() < want/200 {
			return
		}
		if try == 4 {
			t.Fatalf("Nanotime measured %v where time.Since measured %v", got, want)
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
