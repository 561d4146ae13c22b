package machine

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/knemesis/knemesis/threshold"
)

func TestParseProbe(t *testing.T) {
	for in, want := range map[string]Placement{
		"far 0.281\n": {Class: "far", LatencyUs: 0.281},
		"near 0.058":  {Class: "near", LatencyUs: 0.058},
		"far":         Unknown,
		"mid 0.1":     Unknown,
		"far x":       Unknown,
		"":            Unknown,
	} {
		if got := ParseProbe([]byte(in)); got != want {
			t.Errorf("ParseProbe(%q) = %+v, want %+v", in, got, want)
		}
	}
}

// TestProbeTimesOut runs a stand-in probe that outlives ProbeTimeout, with
// a child of its own as the real script has: both are killed and the
// placement is unknown.
func TestProbeTimesOut(t *testing.T) {
	script := filepath.Join(t.TempDir(), "slow-probe")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 30 &\nwait\necho far 0.3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got := Probe(script); got != Unknown {
		t.Errorf("overdue probe gave %+v, want unknown", got)
	}
	if d := time.Since(start); d > ProbeTimeout+2*time.Second {
		t.Errorf("Probe returned after %v; the timeout is %v", d, ProbeTimeout)
	}
	fast := filepath.Join(t.TempDir(), "fast-probe")
	if err := os.WriteFile(fast, []byte("#!/bin/sh\necho near 0.061\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := Probe(fast); got != (Placement{Class: "near", LatencyUs: 0.061}) {
		t.Errorf("probe gave %+v, want near 0.061", got)
	}
}

// TestLinePlacement pins the class of a cache-line time by fixed values on
// each side of threshold.SharedLineMax (150 ns), so that the harness's test,
// which can only compare measured readings with the same rule, rests on a
// rule checked here.
func TestLinePlacement(t *testing.T) {
	if threshold.SharedLineMax != 150*time.Nanosecond {
		t.Fatalf("threshold.SharedLineMax is %v: update the cases below", threshold.SharedLineMax)
	}
	for _, c := range []struct {
		oneWay time.Duration
		want   Placement
	}{
		{40 * time.Nanosecond, Placement{Class: "near", LatencyUs: 0.04}},
		{150 * time.Nanosecond, Placement{Class: "near", LatencyUs: 0.15}},
		{151 * time.Nanosecond, Placement{Class: "far", LatencyUs: 0.151}},
		{250 * time.Nanosecond, Placement{Class: "far", LatencyUs: 0.25}},
		{3 * time.Microsecond, Placement{Class: "far", LatencyUs: 3}},
	} {
		got := LinePlacement(c.oneWay)
		if got.Class != c.want.Class || math.Abs(got.LatencyUs-c.want.LatencyUs) > 1e-12 {
			t.Errorf("LinePlacement(%v) = %+v, want %+v", c.oneWay, got, c.want)
		}
	}
}
