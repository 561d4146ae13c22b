package machine

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/exitwait"
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

// TestProbeTimesOut runs a stand-in probe that never ends, with a child
// of its own as the real script has: Probe gives up at its timeout, the
// placement is unknown, and the child is killed too (it would otherwise
// sleep for ever, and the wait for it would last until go test's timeout).
func TestProbeTimesOut(t *testing.T) {
	dir := t.TempDir()
	script, pidFile := filepath.Join(dir, "slow-probe"), filepath.Join(dir, "child")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep infinity &\necho $! > "+pidFile+"\nwait\necho far 0.3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := Probe(script); got != Unknown {
		t.Errorf("overdue probe gave %+v, want unknown", got)
	}
	if b, err := os.ReadFile(pidFile); err == nil {
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("the probe's child pid file holds %q", b)
		}
		if err := exitwait.Wait(pid); err != nil {
			t.Fatal(err)
		}
	}
	fast := filepath.Join(t.TempDir(), "fast-probe")
	if err := os.WriteFile(fast, []byte("#!/bin/sh\necho near 0.061\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := Probe(fast); got != (Placement{Class: "near", LatencyUs: 0.061}) {
		t.Errorf("probe gave %+v, want near 0.061", got)
	}
}

// TestLinePlacement: one reading alone is filed in class All, with its
// time converted to microseconds; near and far come only from the regimes
// a run's readings show (threshold.FindRegimes, tested there).
func TestLinePlacement(t *testing.T) {
	for _, c := range []struct {
		oneWay time.Duration
		want   float64
	}{
		{40 * time.Nanosecond, 0.04},
		{150 * time.Nanosecond, 0.15},
		{3 * time.Microsecond, 3},
	} {
		got := LinePlacement(c.oneWay)
		if got.Class != All || math.Abs(got.LatencyUs-c.want) > 1e-12 {
			t.Errorf("LinePlacement(%v) = %+v, want class %q, %g µs", c.oneWay, got, All, c.want)
		}
	}
}
