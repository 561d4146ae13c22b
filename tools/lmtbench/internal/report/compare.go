package report

import (
	"slices"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

// Auto is the automatic choice's backend name.
const Auto = "auto"

// Selectors are the rows that choose among the single backends rather
// than being one: each is compared with the best of those.
var Selectors = []string{Auto, "auto-arena", "auto-copy", "table"}

func isSelector(backend string) bool { return slices.Contains(Selectors, backend) }

// Classes are the placement classes CompareAuto compares within, in the
// order it reports them: all (a run showing one regime), then far and near
// (a run whose readings split in two).
var Classes = []string{machine.All, "far", "near"}

// AutoVsBest is how auto did against the best single backend at one size.
type AutoVsBest struct {
	// Backends are the single backends compared: every non-reference
	// backend measured at this size but auto.
	Backends []string      `json:"backends"`
	ByClass  []ClassRatios `json:"by_class"` // one per placement class, far then near
}

// ClassRatios is the comparison within one placement class.
type ClassRatios struct {
	Placement string `json:"placement"`
	// Rounds counts the rounds in which auto's sample and every compared
	// backend's were bracketed in Placement, before and after.
	Rounds int `json:"rounds"`
	// Ratio is the median over those rounds of auto's messages per
	// second over the fastest compared backend's: above 1 auto beat
	// them all. Null when Rounds is 0: not enough same-placement samples.
	Ratio *float64 `json:"ratio"`
}

// CompareAuto sets AutoVsBest on every auto result that has single
// backends beside it. Samples are paired by round (harness.Sample.Round):
// a round counts for a class only if all its samples of the size stayed in
// that class, so that no ratio mixes a far sample with a near one.
func CompareAuto(results []Result) {
	for i := range results {
		a := &results[i]
		if !isSelector(a.Backend) || a.Reference || a.Peer != nil || a.Mode == harness.Pollution {
			continue
		}
		var peers []*Result
		for j := range results {
			r := &results[j]
			if r.Mode == a.Mode && r.Size == a.Size && !r.Reference && r.Peer == nil && !isSelector(r.Backend) {
				peers = append(peers, r)
			}
		}
		if len(peers) == 0 {
			continue
		}
		c := &AutoVsBest{}
		for _, p := range peers {
			c.Backends = append(c.Backends, p.Backend)
		}
		for _, class := range classesOf(a) {
			ratios := pairedRatios(a, peers, class)
			cr := ClassRatios{Placement: class, Rounds: len(ratios)}
			if len(ratios) > 0 {
				m := median(ratios)
				cr.Ratio = &m
			}
			c.ByClass = append(c.ByClass, cr)
		}
		a.AutoVsBest = c
	}
}

// classesOf returns the classes a's samples are compared in: All when the
// run showed one placement regime, else far and near.
func classesOf(a *Result) []string {
	if slices.ContainsFunc(a.all, func(s harness.Sample) bool { return s.Before.Class == machine.All }) {
		return Classes[:1]
	}
	return Classes[1:]
}

// pairedRatios returns, for each round in which auto and every peer have a
// sample bracketed in class, auto's rate over the fastest peer's.
func pairedRatios(auto *Result, peers []*Result, class string) []float64 {
	var ratios []float64
	for _, as := range auto.all {
		if !inClass(as, class) {
			continue
		}
		best, matched := 0.0, true
		for _, p := range peers {
			i := slices.IndexFunc(p.all, func(s harness.Sample) bool { return s.Round == as.Round })
			if matched = i >= 0 && inClass(p.all[i], class); !matched {
				break
			}
			best = max(best, rate(p.all[i]))
		}
		if matched {
			ratios = append(ratios, rate(as)/best)
		}
	}
	return ratios
}

func inClass(s harness.Sample, class string) bool {
	return s.Before.Class == class && s.After.Class == class
}

// rate is messages per second: at one size, throughput up to a constant,
// and still defined for empty messages.
func rate(s harness.Sample) float64 { return float64(s.Messages) / s.Seconds }

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
