package threshold

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// MeasureFunc measures the throughput of backend for messages of size
// bytes, in payload bytes per second. It returns an error wrapping
// ErrBackendUnavailable when the backend cannot run here (no module, CMA
// refused), which drops the backend from the tuning instead of failing it.
type MeasureFunc func(backend string, size int) (bytesPerSec float64, err error)

// ErrBackendUnavailable is what a MeasureFunc wraps for a backend that
// cannot run on this machine.
var ErrBackendUnavailable = errors.New("backend unavailable")

// Tolerance is how much faster (relative) a backend must be than the one
// chosen at the previous size to take over. It keeps run-to-run noise from
// making the table flip between two equal backends; the chosen backend is
// thus never slower than the best by more than this at a measured size.
const Tolerance = 0.03

// SweepSizes are the sizes of the ping-pong sweep: powers of two
// from 4 KiB to 64 MiB, enough to bracket every switch this package makes
// (LMT from 4–64 KiB, DMA_min from ~200 KiB to tens of MiB).
func SweepSizes() []int {
	var s []int
	for n := 4 << 10; n <= 64<<20; n *= 2 {
		s = append(s, n)
	}
	return s
}

// Tune measures each backend at each size and returns the table of
// fastest backends. Sizes must ascend. Include Eager among the backends to
// measure the eager→LMT switch too. Without backends, all LMT backends are
// measured. Measurements interleave backends at each size, so that slow
// drift of the machine (placement, frequency) biases none of them.
func Tune(measure MeasureFunc, sizes []int, backends ...Backend) (*TunedTable, error) {
	if len(backends) == 0 {
		backends = Backends
	}
	for _, b := range backends {
		if !b.Valid() {
			return nil, fmt.Errorf("tune: unknown backend %q", b)
		}
	}
	if len(sizes) == 0 {
		return nil, errors.New("tune: no sizes")
	}
	for i, s := range sizes {
		if s <= 0 || (i > 0 && s <= sizes[i-1]) {
			return nil, fmt.Errorf("tune: sizes must be positive and ascending, got %d after %v", s, sizes[:i])
		}
	}
	tt := &TunedTable{Concurrent: 1}
	gone := map[Backend]bool{}
	rate := map[Backend][]float64{}
	for _, size := range sizes {
		for _, b := range backends {
			if gone[b] {
				continue
			}
			bps, err := measure(string(b), size)
			if errors.Is(err, ErrBackendUnavailable) {
				gone[b] = true
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("tune: %s at %d bytes: %w", b, size, err)
			}
			if !(bps > 0) || math.IsInf(bps, 0) {
				return nil, fmt.Errorf("tune: %s at %d bytes: throughput %v is not a positive rate", b, size, bps)
			}
			rate[b] = append(rate[b], bps)
		}
	}
	var lmt []Backend
	for _, b := range backends {
		if gone[b] {
			continue
		}
		for i, bps := range rate[b] {
			tt.Points = append(tt.Points, Point{Size: sizes[i], Backend: b, BytesPerSec: bps})
		}
		if b != Eager {
			lmt = append(lmt, b)
		}
	}
	if len(lmt) == 0 {
		return nil, fmt.Errorf("tune: no LMT backend could be measured: %w", ErrBackendUnavailable)
	}

	best := make([]Backend, len(sizes))
	for i := range sizes {
		for _, b := range lmt {
			if best[i] == "" || rate[b][i] > rate[best[i]][i] {
				best[i] = b
			}
		}
		if i > 0 && rate[best[i-1]][i] >= rate[best[i]][i]*(1-Tolerance) {
			best[i] = best[i-1]
		}
		if n := len(tt.Rules); n == 0 || tt.Rules[n-1].Backend != best[i] {
			tt.Rules = append(tt.Rules, TunedRule{From: int64(sizes[i]), Backend: best[i]})
		}
	}
	if e, ok := rate[Eager]; ok && !gone[Eager] {
		tt.LMTMin = eagerSwitch(sizes, e, func(i int) float64 { return rate[best[i]][i] })
		tt.Rules = trimBelow(tt.Rules, tt.LMTMin)
	}
	return tt, nil
}

// eagerSwitch is the smallest measured size from which the chosen LMT
// backend beats the eager path at every larger size; one past the largest
// size when eager always wins.
func eagerSwitch(sizes []int, eager []float64, lmt func(int) float64) int64 {
	sw := int64(sizes[len(sizes)-1]) + 1
	for i := len(sizes) - 1; i >= 0 && lmt(i) > eager[i]; i-- {
		sw = int64(sizes[i])
	}
	return sw
}

// trimBelow drops rules wholly under the LMT switch and starts the first
// remaining rule at it.
func trimBelow(rules []TunedRule, from int64) []TunedRule {
	i := 0
	for i+1 < len(rules) && rules[i+1].From <= from {
		i++
	}
	rules = slices.Clone(rules[i:])
	rules[0].From = from
	return rules
}
