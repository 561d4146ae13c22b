package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/knemesis/knemesis/tools/copyprobe"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// copyBytes is about how much payload a copy-count job moves: enough that
// the harness's own control traffic (24-byte commands on a pipe, counted as
// kernel copies in tracepoint mode) stays below 10^-5 of it.
const copyBytes = 8 << 20

// copyCounter counts the copies of lmtbench's jobs with the eBPF probes of
// tools/copyprobe. Each (backend, size) gets a job of its own, run with a
// fixed iteration count and no placement probe, so that the bytes it moves
// are known exactly and nothing else runs in the tracked processes.
type copyCounter struct {
	probe *copyprobe.Probe
	mode  string // "user=uprobe kernel=tracepoint dma=…"
}

// openCopyCounter loads the probes and tracks every process this one
// starts from now on.
func openCopyCounter() (*copyCounter, error) {
	p, err := copyprobe.Open(copyprobe.Options{})
	if err != nil {
		return nil, err
	}
	if err := p.TrackChildren(os.Getpid()); err != nil {
		p.Close()
		return nil, err
	}
	user, kernel, dma := p.Status()
	return &copyCounter{probe: p, mode: describeModes(user, kernel, dma)}, nil
}

func describeModes(user, kernel, dma copyprobe.Status) string {
	var parts []string
	for _, c := range []struct {
		who string
		s   copyprobe.Status
	}{{"user", user}, {"kernel", kernel}, {"dma", dma}} {
		if c.s.Attached() {
			parts = append(parts, c.who+"="+string(c.s.Mode))
		} else {
			parts = append(parts, c.who+"=none")
		}
	}
	return strings.Join(parts, " ")
}

func (c *copyCounter) Close() error { return c.probe.Close() }

// count runs one job of mode over backend at size and returns bytes copied
// per payload byte by each copier that the probes could attach to; a
// copier they could not attach to is absent, never zero.
func (c *copyCounter) count(ctx context.Context, o *options, mode, backend string, size int, cpus []int) (map[string]float64, error) {
	// At least 8 iterations, and about copyBytes in all. The uprobe sits
	// past memcopy.Copy's stack check (copyprobe), so a call whose stack
	// grows counts once, not twice as it did on the entry.
	iters := max(8, copyBytes/size/harness.MessagesPerIteration(mode))
	spec := harness.Spec{Mode: mode, Backend: backend, Sizes: []int{size}, Iters: iters, Samples: 1, CPUs: cpus}
	if err := c.probe.Reset(); err != nil {
		return nil, err
	}
	if err := harness.Run(ctx, spec, o.timeout, func(harness.Sample) {}); err != nil {
		return nil, err
	}
	rep, err := c.probe.Read()
	if err != nil {
		return nil, err
	}
	messages := harness.VerifyMessages(mode) + (harness.WarmupIterations(mode, iters)+harness.RewarmIterations(mode, iters)+iters)*harness.MessagesPerIteration(mode)
	per := rep.CopiesPerByte(uint64(messages) * uint64(size))
	out := map[string]float64{}
	for who, v := range map[string]float64{"user": per.User, "kernel": per.Kernel, "dma": per.DMA} {
		if !math.IsNaN(v) {
			out[who] = v
		}
	}
	return out, nil
}

// addCopies fills the copies of each result.
func (c *copyCounter) addCopies(ctx context.Context, o *options, results []report.Result, bar *progress) error {
	for i := range results {
		r := &results[i]
		copies, err := c.count(ctx, o, r.Mode, r.Backend, r.Size, r.CPUs)
		if err != nil {
			return err
		}
		r.CopiesPerByte, r.CopiesMode = copies, c.mode
		bar.step("copies " + r.Backend + " " + units.Format(r.Size))
	}
	return nil
}

const defaultCopySizes = "64K,1M,16M"

// runCopies is `lmtbench copies`: copies per byte by copier, per backend
// and size, in the ping-pong shape.
func runCopies(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	sizes, err := o.sizeList(defaultCopySizes, 1)
	if err != nil {
		return err
	}
	backends, skipped, err := o.backendList()
	if err != nil {
		return err
	}
	cpus, err := o.pinning(2)
	if err != nil {
		return err
	}
	c, err := openCopyCounter()
	if err != nil {
		return fmt.Errorf("copies: %w", err)
	}
	defer c.Close()
	bar := newProgress(stderr, o.progress, len(backends)*len(sizes))
	var results []report.Result
	for _, b := range backends {
		for _, size := range sizes {
			results = append(results, report.Result{
				Mode: harness.PingPong, Backend: b.Name, Reference: b.Reference, Size: size, CPUs: cpus,
			})
		}
	}
	err = c.addCopies(ctx, o, results, bar)
	bar.done()
	if err != nil {
		return err
	}
	switch {
	case o.json:
		return report.WriteJSON(stdout, results)
	case o.csv:
		return report.WriteCSV(stdout, results)
	case o.benchfmt:
		return fmt.Errorf("copies: --benchfmt carries timings only; use --json or --csv")
	}
	fmt.Fprintf(stdout, "bytes copied per payload byte, ping-pong; counted by %s\n", c.mode)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tsize\tuser\tkernel\tdma\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", r.Backend, units.Format(r.Size),
			copyCell(r.CopiesPerByte, "user"), copyCell(r.CopiesPerByte, "kernel"), copyCell(r.CopiesPerByte, "dma"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, why := range skipped {
		fmt.Fprintf(stdout, "not measured: %v\n", why)
	}
	return nil
}

func copyCell(c map[string]float64, who string) string {
	v, ok := c[who]
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%.3f", v)
}
