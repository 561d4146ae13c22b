package machine

import (
	"testing"
	"time"
)

// spread returns n readings around center, ±frac, in a fixed zigzag.
func spread(n int, center, frac float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = center * (1 + frac*float64(i%5-2)/2)
	}
	return out
}

func TestRegimesOne(t *testing.T) {
	// One regime sitting on the old fixed 150 ns line: no split.
	r := FindRegimes(spread(40, 0.148, 0.05))
	if r.Two || r.N != 40 || r.Class(0.140) != All || r.Class(0.160) != All {
		t.Fatalf("%+v: want one regime of 40 readings, every reading %q", r, All)
	}
	if r.Low != 148*time.Nanosecond {
		t.Fatalf("median %v, want 148ns", r.Low)
	}
}

func TestRegimesTwo(t *testing.T) {
	readings := append(spread(30, 0.045, 0.1), spread(20, 0.30, 0.2)...)
	r := FindRegimes(readings)
	if !r.Two || r.N != 50 || r.Class(0.05) != "near" || r.Class(0.25) != "far" {
		t.Fatalf("%+v: want near and far", r)
	}
	// The line in the gap: between the largest near (49.5 ns) and the
	// smallest far (240 ns).
	if r.Line <= 49*time.Nanosecond || r.Line >= 240*time.Nanosecond {
		t.Fatalf("line %v, want inside the gap (49.5ns, 240ns)", r.Line)
	}
	if r.Class(0) != "unknown" {
		t.Fatalf("class of no reading %q, want unknown", r.Class(0))
	}
}

// A few preempted readings (under a tenth) are noise, not a regime.
func TestRegimesOutliersAreNoise(t *testing.T) {
	readings := append(spread(40, 0.05, 0.1), 3.0, 2.5, 4.0)
	if r := FindRegimes(readings); r.Two {
		t.Fatalf("%+v: 3 outliers in 43 readings made a regime", r)
	}
}

// Noise as wide as 40% in one regime does not split it.
func TestRegimesWideNoise(t *testing.T) {
	if r := FindRegimes(spread(100, 0.2, 0.4)); r.Two {
		t.Fatalf("%+v: one noisy regime split in two", r)
	}
}

func TestRegimesEmpty(t *testing.T) {
	r := FindRegimes([]float64{0, 0})
	if r.Two || r.N != 0 || r.String() != "no readings" || r.Class(0.1) != All {
		t.Fatalf("%+v %q", r, r.String())
	}
}
