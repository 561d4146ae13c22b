package cli

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

func runInfo(_ context.Context, o *options, stdout, _ io.Writer) error {
	return writeInfo(stdout, o, true)
}

// writeInfo prints the machine, the placement right now and every
// backend's status. full adds the one-line description of each backend.
func writeInfo(w io.Writer, o *options, full bool) error {
	f := machine.Detect()
	fmt.Fprintf(w, "machine:   %s, %d CPUs usable (%s), kernel %s, %s\n", f.CPUModel, len(f.CPUs), cpuRange(f.CPUs), f.Kernel, f.Go)
	fmt.Fprintln(w, "caches:    unknown to this build — cache sizes and sharing come from package threshold (branch select), not merged yet")
	probe := o.probePath()
	if probe == "" {
		fmt.Fprintln(w, "placement: unknown (no placement probe at ../shared/tools/placement-probe)")
	} else {
		p := machine.Probe(probe)
		fmt.Fprintf(w, "placement: %s %.3f µs cache-line one-way now (%s)\n", p.Class, p.LatencyUs, probe)
	}
	fmt.Fprintln(w, "backends:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, b := range engine.All() {
		status := "works"
		if err := b.Check(); err != nil {
			status = "no: " + engine.Explain(err)
		}
		if full {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", b.Name, b.Summary, status)
		} else {
			fmt.Fprintf(tw, "  %s\t%s\n", b.Name, status)
		}
	}
	return tw.Flush()
}
