package machine

import (
	"time"

	"github.com/knemesis/knemesis/threshold"
)

// Regimes files a run's placement readings (one-way cache-line times, µs)
// near or far only where they show two regimes (threshold.FindRegimes:
// the same gap test package auto applies to its pairs), else all in one
// class, All.
type Regimes struct{ threshold.Regimes }

// All is the placement class of every reading when a run shows one regime.
const All = "all"

// GapRatio is threshold.GapRatio, for lmtbench's own messages.
const GapRatio = threshold.GapRatio

// FindRegimes looks for two regimes in readings (µs; zeros, from unknown
// placements, are left out).
func FindRegimes(readings []float64) Regimes {
	d := make([]time.Duration, len(readings))
	for i, x := range readings {
		d[i] = time.Duration(x * float64(time.Microsecond))
	}
	return Regimes{threshold.FindRegimes(d)}
}

// Class returns the class of a reading: "near" or "far" when two regimes
// were found, else All; "unknown" for no reading (0).
func (r Regimes) Class(latencyUs float64) string {
	switch {
	case latencyUs <= 0:
		return Unknown.Class
	case !r.Two:
		return All
	case r.Far(time.Duration(latencyUs * float64(time.Microsecond))):
		return "far"
	}
	return "near"
}

// String says what was found, in one line.
func (r Regimes) String() string {
	if r.N > 0 && !r.Two {
		return r.Regimes.String() + ": samples not split"
	}
	return r.Regimes.String()
}
