package threshold

import (
	"fmt"
	"slices"
)

// Pairs picks the CPU pairs `lmtbench tune` measures: one that shares a
// cache and one that does not, each present only when the machine has
// such a pair. The sharing pair shares as few cache levels as possible
// (two cores behind one L3 rather than two SMT threads of one core), as MPI
// ranks are usually placed one per core.
func (t *Topology) Pairs() (shared, unshared [2]int, hasShared, hasUnshared bool) {
	if len(t.CPUs) < 2 {
		return
	}
	a := t.CPUs[0]
	fewest := 0
	for _, b := range t.CPUs[1:] {
		n := 0
		for _, c := range t.Caches {
			if c.HoldsData() && c.CPUs.Contains(a) && c.CPUs.Contains(b) {
				n++
			}
		}
		switch {
		case n == 0 && !hasUnshared:
			unshared, hasUnshared = [2]int{a, b}, true
		case n > 0 && (!hasShared || n < fewest):
			shared, hasShared, fewest = [2]int{a, b}, true, n
		}
	}
	return
}

// Verdict compares, at one size, the backend a table chooses with the
// fastest one measured.
type Verdict struct {
	Size      int
	Chosen    Backend // Eager when the table sends the size eagerly
	ChosenBps float64
	Best      Backend
	BestBps   float64
}

// Ratio is the chosen backend's throughput over the best's (1 = optimal).
func (v Verdict) Ratio() float64 { return v.ChosenBps / v.BestBps }

// Compare replays measured points through a table: for each measured size,
// what the table picks and how it fares against the best measured backend.
// This is the check behind "the automatic choice is within 10% of the best
// single backend at every size". DMA and CPU copies of the module are not
// told apart: points name backends only.
func Compare(points []Point, t *Table) ([]Verdict, error) {
	var sizes []int
	for _, p := range points {
		sizes = append(sizes, p.Size)
	}
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	verdicts := make([]Verdict, 0, len(sizes))
	for _, size := range sizes {
		v := Verdict{Size: size, Chosen: Eager}
		if c := t.Choose(int64(size)); !c.Eager {
			v.Chosen = c.Backend
		}
		found := false
		for _, p := range points {
			if p.Size != size {
				continue
			}
			if p.BytesPerSec > v.BestBps {
				v.Best, v.BestBps = p.Backend, p.BytesPerSec
			}
			if p.Backend == v.Chosen {
				v.ChosenBps, found = p.BytesPerSec, true
			}
		}
		if !found {
			return nil, fmt.Errorf("compare: the table picks %s at %d bytes, which was not measured", v.Chosen, size)
		}
		verdicts = append(verdicts, v)
	}
	return verdicts, nil
}
