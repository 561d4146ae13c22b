package copyprobe_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/tools/copyprobe"
)

func TestMeasurePollutionMechanics(t *testing.T) {
	// A transfer that writes 16 MiB, as a receive of a large message would.
	big := make([]byte, 16<<20)
	calls := 0
	res, err := copyprobe.MeasurePollution(1<<20, 5, func() error {
		calls++
		for i := range big {
			big[i] = byte(i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 5 || res.Rounds != 5 {
		t.Errorf("transfer called %d times, Rounds = %d; want 5 and 5", calls, res.Rounds)
	}
	if res.Baseline <= 0 || res.AfterTransfer <= 0 {
		t.Errorf("re-read times %v and %v, want both positive", res.Baseline, res.AfterTransfer)
	}
	if want := float64(res.AfterTransfer) / float64(res.Baseline); res.Slowdown != want {
		t.Errorf("Slowdown = %v, want AfterTransfer/Baseline = %v", res.Slowdown, want)
	}
	// No timing assertion: the machine is shared. The figure is for reading.
	t.Logf("1 MiB working set after a 16 MiB write: %v vs %v, slowdown %.2f", res.AfterTransfer, res.Baseline, res.Slowdown)

	counter, cerr := copyprobe.OpenCacheMissCounter()
	if cerr == nil {
		counter.Close()
		if res.MissesErr != nil {
			t.Errorf("a cache-miss counter opens, but MeasurePollution did not use it: %v", res.MissesErr)
		}
	} else if !errors.Is(res.MissesErr, copyprobe.ErrNoCacheCounters) && res.MissesErr.Error() != cerr.Error() {
		t.Errorf("MissesErr = %v, want the counter's error %v", res.MissesErr, cerr)
	}
}

func TestMeasurePollutionStopsOnTransferError(t *testing.T) {
	boom := errors.New("peer died")
	calls := 0
	_, err := copyprobe.MeasurePollution(4096, 4, func() error {
		calls++
		if calls == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "round 1") || calls != 2 {
		t.Errorf("err = %v after %d calls; want %v in round 1 after 2 calls", err, calls, boom)
	}
}

func TestMeasurePollutionRejectsBadInput(t *testing.T) {
	nop := func() error { return nil }
	for _, c := range []struct {
		ws     int
		rounds int
		fn     func() error
		want   string
	}{
		{100, 1, nop, "working set of 100 bytes"},
		{4096, 0, nop, "0 rounds"},
		{4096, 1, nil, "nil transfer"},
	} {
		if _, err := copyprobe.MeasurePollution(c.ws, c.rounds, c.fn); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("MeasurePollution(%d bytes, %d rounds): %v, want error containing %q", c.ws, c.rounds, err, c.want)
		}
	}
}

// On this machine (a VM without a PMU) the counter must say "not
// supported"; where one exists it must count.
func TestCacheMissCounter(t *testing.T) {
	c, err := copyprobe.OpenCacheMissCounter()
	if err != nil {
		if !errors.Is(err, copyprobe.ErrNoCacheCounters) {
			t.Fatalf("OpenCacheMissCounter: %v; want either a counter or %v", err, copyprobe.ErrNoCacheCounters)
		}
		t.Logf("as expected without a PMU: %v", err)
		return
	}
	defer c.Close()
	n, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cache misses so far on this thread: %d", n)
}
