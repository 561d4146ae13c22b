package threshold

import (
	"fmt"
	"slices"
)

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
