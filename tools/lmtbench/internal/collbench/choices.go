package collbench

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/threshold"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// choicesOp is the Spec.Op of the job that reports the backend table
// instead of measuring.
const choicesOp = "choices"

// Choices is what that job's rank 0 prints: the lines of the table.
type Choices struct {
	Lines []string
}

// choices is the table of rank 0's messages to rank 1, the pair every
// collective here has, by message size and k, the number of transfers
// into one receiver at once (k = n-1 in an Alltoall of n ranks): the
// endpoint's switch to the LMT, then the selector's table rebuilt with k
// concurrent transfers, which lowers DMA_min by k (threshold.DMAMin) and
// KNEM's switch (§4.4). It is the table's choice: between ChooseAbove and
// the eager limit, and above, auto's Learner may measure another.
func choices(ep *knemesis.Endpoint, sizes []int) ([]string, error) {
	sel := ep.Selection
	pair := sel.Pair(1)
	if pair == nil {
		return nil, fmt.Errorf("choices: rank 0 has no table for rank 1")
	}
	n := ep.Size()
	_, src0 := sel.CPU(0)
	_, src1 := sel.CPU(1)
	lines := []string{fmt.Sprintf("LMT choice for a message from rank 0 (cpu%d, %s) to rank 1 (cpu%d, %s) by size and k, the transfers into one receiver at once (k = ranks-1 in an Alltoall); eager limit %d B, eager or LMT measured per peer above %d B; package coll builds its endpoint for k=1 (knemesis.Join's default): the other columns are what the selector's table would choose",
		pair.Placement.Sender, src0, pair.Placement.Receiver, src1, sel.EagerMax(), sel.ChooseAbove())}
	tables := make([]*threshold.Table, n)
	for k := 1; k < n; k++ {
		env := threshold.Env{Placement: pair.Placement, Unavailable: pair.Unavailable, Knem: !slices.Contains(pair.Unavailable, threshold.Knem)}
		env.Concurrent = k
		info, err := pair.Info.For(env)
		if err != nil {
			return nil, fmt.Errorf("choices: the table with %d concurrent transfers: %w", k, err)
		}
		tables[k] = info.Table
	}
	for _, size := range sizes {
		cells := []string{fmt.Sprintf("%9s", units.Format(size))}
		for k := 1; k < n; k++ {
			cells = append(cells, fmt.Sprintf("k=%d %s", k, choiceAt(tables[k], size, sel.ChooseAbove())))
		}
		lines = append(lines, strings.Join(cells, "  "))
	}
	return lines, nil
}

// choiceAt is what a message of size goes by: eagerly up to chooseAbove
// whatever the table, else the table's choice.
func choiceAt(t *threshold.Table, size, chooseAbove int) string {
	if size <= chooseAbove {
		return "eager"
	}
	c := t.Choose(int64(size))
	switch {
	case c.Eager:
		return "eager"
	case c.DMA:
		return string(c.Backend) + "+dma"
	}
	return string(c.Backend)
}

func writeChoices(w io.Writer, lines []string) error {
	return json.NewEncoder(w).Encode(Choices{Lines: lines})
}
