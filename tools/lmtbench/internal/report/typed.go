package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// The rows of lmtbench vector and indexed: the message sent as its
// datatype, and packed into one buffer (as MPICH does).
const (
	TypedRow = "typed"
	PackRow  = "pack"
)

// CompareTyped sets TypedVsPack on every typed row that has a pack row of
// the same mode and size: the ratio of their throughputs.
func CompareTyped(results []Result) {
	for i := range results {
		t := &results[i]
		if t.Backend != TypedRow {
			continue
		}
		if p := packRow(results, t); p != nil && p.BytesPerSec > 0 {
			ratio := t.BytesPerSec / p.BytesPerSec
			t.TypedVsPack = &ratio
		}
	}
}

func packRow(results []Result, t *Result) *Result {
	for j := range results {
		if p := &results[j]; p.Backend == PackRow && p.Mode == t.Mode && p.Size == t.Size {
			return p
		}
	}
	return nil
}

// writeTypedVsPack prints, per size, the typed row over the pack row,
// both sides shown, latency and throughput.
func writeTypedVsPack(w io.Writer, results []Result, mode string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	any := false
	for i := range results {
		t := &results[i]
		if t.Mode != mode || t.TypedVsPack == nil {
			continue
		}
		if !any {
			fmt.Fprintln(w, "typed ÷ pack (medians of this run; above 1: sending the datatype beats packing it)")
			any = true
		}
		p := packRow(results, t)
		fmt.Fprintf(tw, "%s\ttyped ÷ pack\t%.2f GB/s ÷ %.2f GB/s\t= %.2f\t(latency %.2f µs vs %.2f µs)\n",
			units.Format(t.Size), t.BytesPerSec/1e9, p.BytesPerSec/1e9, *t.TypedVsPack, t.LatencyUs, p.LatencyUs)
	}
	return tw.Flush()
}
