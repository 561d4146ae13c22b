package machine

import (
	"fmt"
	"math"
	"slices"
)

// Regimes says whether a run's placement readings (one-way cache-line
// times) fall in two regimes, near and far, or in one.
//
// A fixed line cannot tell them apart on every machine: a VM whose vCPUs
// the hypervisor moves between one core and two shows two populations
// (tens of nanoseconds, then hundreds), a bare-metal machine with pinned
// ranks one, and a fixed 150 ns line drawn on a machine whose one regime
// sits at 148 ns flips its samples between classes at random. So the line
// is learned from the run's own readings: sorted, they split in two only
// at a gap, two neighbouring readings at least GapRatio apart, with at
// least a tenth of the readings (and two) on each side. Otherwise every
// reading is in one class, All.
type Regimes struct {
	Two bool
	// Line is the boundary in µs when Two: the geometric middle of the
	// gap; near readings are below it.
	Line float64
	// Low and High are the medians of the readings below and above Line
	// (Low holds the median of all readings when !Two).
	Low, High float64
	N         int // readings
}

// GapRatio is the least ratio between two neighbouring sorted readings
// that splits them into two regimes: wider than the spread of one regime
// under noise (a few percent, 20% under load), narrower than the factor
// between a shared core and two cores (3-10 on the machines measured).
const GapRatio = 1.5

// All is the placement class of every reading when a run shows one regime.
const All = "all"

// FindRegimes looks for two regimes in readings (µs; zeros, from unknown
// placements, are left out).
func FindRegimes(readings []float64) Regimes {
	s := make([]float64, 0, len(readings))
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
		if g := s[i] / s[i-1]; g > ratio {
			split, ratio = i, g
		}
	}
	if split < 0 || ratio < GapRatio {
		r.Low = s[(len(s)-1)/2]
		return r
	}
	lo, hi := s[:split], s[split:]
	r.Two = true
	r.Line = math.Sqrt(lo[len(lo)-1] * hi[0])
	r.Low, r.High = lo[(len(lo)-1)/2], hi[(len(hi)-1)/2]
	return r
}

// Class returns the class of a reading: "near" or "far" when r.Two, else
// All; "unknown" for no reading (0).
func (r Regimes) Class(latencyUs float64) string {
	switch {
	case latencyUs <= 0:
		return Unknown.Class
	case !r.Two:
		return All
	case latencyUs < r.Line:
		return "near"
	}
	return "far"
}

// String says what was found, in one line.
func (r Regimes) String() string {
	switch {
	case r.N == 0:
		return "no readings"
	case r.Two:
		return fmt.Sprintf("two regimes in %d readings: near (median %.3f µs) below %.3f µs, far (median %.3f µs) above", r.N, r.Low, r.Line, r.High)
	}
	return fmt.Sprintf("one regime in %d readings (median %.3f µs, no gap of %.1f× between neighbours): samples not split", r.N, r.Low, GapRatio)
}
