package threshold

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Regimes says whether one-way cache-line readings between processes fall
// in two regimes, near and far, or in one.
//
// No fixed line tells them apart on every machine: a VM whose vCPUs the
// hypervisor moves between one core and two shows two populations (tens
// of nanoseconds, then hundreds), a bare-metal machine with pinned ranks
// one, and a fixed 150 ns line drawn on a machine whose one regime sits at
// 148 ns files its pairs near or far at random. So the line is learned
// from the readings themselves: sorted, they split in two only at a gap,
// two neighbouring readings at least GapRatio apart, with at least a tenth
// of the readings (and two) on each side: one reading is no regime. Otherwise they are one regime,
// and no reading is far: the topology decides.
type Regimes struct {
	Two bool
	// Line is the boundary when Two, the geometric middle of the gap:
	// readings at or above it are far.
	Line time.Duration
	// Low and High are the medians of the readings below and above Line
	// (Low is the median of all of them when !Two).
	Low, High time.Duration
	N         int // readings
}

// GapRatio is the least ratio between two neighbouring sorted readings
// that splits them into two regimes: wider than the spread of one regime
// under noise (a few percent, 20% under load), narrower than the factor
// between a shared core and two cores (3-10 on the machines measured).
const GapRatio = 1.5

// FindRegimes looks for two regimes in readings (zeros, unmeasured, are
// left out).
func FindRegimes(readings []time.Duration) Regimes {
	s := make([]time.Duration, 0, len(readings))
	for _, x := range readings {
		if x > 0 {
			s = append(s, x)
		}
	}
	slices.Sort(s)
	r := Regimes{N: len(s)}
	if len(s) == 0 {
		return r
	}
	minSide := max(2, len(s)/10)
	split, ratio := -1, 0.0
	for i := minSide; i <= len(s)-minSide; i++ {
		if g := float64(s[i]) / float64(s[i-1]); g > ratio {
			split, ratio = i, g
		}
	}
	if split < 0 || ratio < GapRatio {
		r.Low = s[(len(s)-1)/2]
		return r
	}
	lo, hi := s[:split], s[split:]
	r.Two = true
	r.Line = time.Duration(geomean(float64(lo[len(lo)-1]), float64(hi[0])))
	r.Low, r.High = lo[(len(lo)-1)/2], hi[(len(hi)-1)/2]
	return r
}

func geomean(a, b float64) float64 { return math.Sqrt(a * b) }

// Far reports whether reading d is in the far regime (never when the
// readings showed one).
func (r Regimes) Far(d time.Duration) bool { return r.Two && d >= r.Line }

// String says what was found, in one line.
func (r Regimes) String() string {
	switch {
	case r.N == 0:
		return "no readings"
	case r.Two:
		return fmt.Sprintf("two regimes in %d readings: near (median %v) below %v, far (median %v) above", r.N, r.Low, r.Line, r.High)
	}
	return fmt.Sprintf("one regime in %d readings (median %v, no gap of %.1f× between neighbours)", r.N, r.Low, GapRatio)
}
