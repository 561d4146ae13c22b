package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/knemesis/knemesis/threshold"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
	"github.com/knemesis/knemesis/topology"
)

// runTune is `lmtbench tune`: measure the ping-pong throughput of every
// LMT backend and of the eager path on each kind of CPU pair this machine
// has (sharing a cache, not sharing one, or one pair in both placements:
// see splitPlacements), let package threshold pick the
// crossovers (threshold.Tune), and write the tuning file the selector
// loads at start. It then replays the measurements through the formula's
// table and the tuned one, so the user sees what tuning changed.
func runTune(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	def := make([]string, 0, 16)
	for _, n := range threshold.SweepSizes() {
		def = append(def, units.Format(n))
	}
	sizes, err := o.sizeList(strings.Join(def, ","), 1)
	if err != nil {
		return err
	}
	path := o.tuningFile
	if path == "" {
		if path, err = threshold.DefaultTuningPath(); err != nil {
			return err
		}
	}
	topo, err := machine.Topology()
	if err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	allowed, err := machine.AllowedCPUs()
	if err != nil {
		return err
	}
	type pair struct {
		cpus   [2]int
		shared bool
	}
	var pairs []pair
	shared, unshared, hasShared, hasUnshared := topo.Pairs()
	for _, p := range []pair{{shared, true}, {unshared, false}} {
		if (p.shared && hasShared || !p.shared && hasUnshared) && slices.Contains(allowed, p.cpus[0]) && slices.Contains(allowed, p.cpus[1]) {
			pairs = append(pairs, p)
		}
	}
	if len(pairs) == 0 {
		return fmt.Errorf("tune: no pair of two CPUs this process may use (%s)", topology.CPUSet(allowed).String())
	}
	backends, skipped, err := o.tuneBackends()
	if err != nil {
		return err
	}
	engines := make([]engine.Backend, len(backends))
	for i, name := range backends {
		if engines[i], err = engine.Lookup(name); err != nil {
			return err
		}
	}
	here := threshold.ThisMachine(topo)
	file := &threshold.TuningFile{Machine: here}
	if old, err := threshold.LoadTuning(path, here); err == nil {
		file = old // keep the other kind of pair's table
	}
	probe := o.probePath()
	bar := newProgress(stderr, o.progress, len(pairs)*len(backends)*len(sizes)*o.samples)
	var all []report.Result
	type tuned struct {
		cpus          [2]int
		shared, apart bool // the table's kind; apart: measured so, on a pair the topology says shares
		summary       string
	}
	var done []tuned
	for _, p := range pairs {
		cpus := []int{p.cpus[0], p.cpus[1]}
		spec := harness.Spec{Mode: harness.PingPong, Iters: o.iters, SampleTime: o.sampleTime, CPUs: cpus, Probe: probe, Warmup: o.warmup}
		results, more, err := o.interleave(ctx, spec, engines, sizes, bar)
		if err != nil {
			bar.done()
			return err
		}
		skipped = append(skipped, more...)
		all = append(all, results...)
		for _, part := range splitPlacements(results, p.shared && !hasUnshared) {
			tt, err := threshold.Tune(measured(part.results), sizes, toThreshold(backends)...)
			if err != nil {
				bar.done()
				return err
			}
			tt.SharedCache, tt.Pair, tt.Concurrent = p.shared && !part.apart, p.cpus, 1
			file.Put(*tt)
			done = append(done, tuned{p.cpus, tt.SharedCache, part.apart, describeTuned(*tt, sizes[len(sizes)-1])})
		}
	}
	bar.done()
	file.Measured = time.Now().UTC()
	if err := file.Save(path); err != nil {
		return err
	}
	if o.json || o.csv || o.benchfmt {
		return o.write(stdout, all)
	}
	fmt.Fprintf(stdout, "tuning file written: %s (machine: %s, %s)\n", path, here.CPUModel, here.Caches)
	for _, d := range done {
		kind := map[bool]string{true: "sharing a cache", false: "sharing no cache"}[d.shared]
		if d.apart {
			kind = "measured apart: far samples, filed as sharing no cache"
		}
		fmt.Fprintf(stdout, "\ncpus %d,%d (%s): %s\n", d.cpus[0], d.cpus[1], kind, d.summary)
		if err := writeVerdicts(stdout, topo, d.cpus, d.apart, file, file.Tables[tableIndex(file, d.shared)].Points); err != nil {
			return err
		}
	}
	for _, why := range skipped {
		fmt.Fprintf(stdout, "not measured: %v\n", why)
	}
	return nil
}

// tunedPart is the measurements one tuned table is made from.
type tunedPart struct {
	results []report.Result
	apart   bool // far samples of a pair the topology says shares a cache
}

// splitPlacements sorts a pair's measurements by placement. On a VM whose
// vCPUs the hypervisor moves between one core and two, a pair the topology
// says shares a cache behaves as one only in near placement; its far
// samples are what a pair sharing nothing does, which auto detects
// with its cache-line probe and serves from the "no shared cache" table.
// When the placement probe saw both placements for every point (and the
// machine has no real unshared pair to measure), each placement makes its
// own table; otherwise the results make one table, as measured.
func splitPlacements(results []report.Result, vmPair bool) []tunedPart {
	if !vmPair {
		return []tunedPart{{results: results}}
	}
	var near, far []report.Result
	for i := range results {
		if n, ok := results[i].In("near"); ok {
			near = append(near, n)
		}
		if f, ok := results[i].In("far"); ok {
			far = append(far, f)
		}
	}
	var parts []tunedPart
	if len(near) == len(results) {
		parts = append(parts, tunedPart{results: near})
	}
	if len(far) == len(results) {
		parts = append(parts, tunedPart{results: far, apart: true})
	}
	if len(parts) == 0 {
		parts = append(parts, tunedPart{results: results})
	}
	return parts
}

// measured serves a tuning's measurements to threshold.Tune.
func measured(results []report.Result) func(backend string, size int) (float64, error) {
	bps := map[string]map[int]float64{}
	for _, r := range results {
		if bps[r.Backend] == nil {
			bps[r.Backend] = map[int]float64{}
		}
		bps[r.Backend][r.Size] = r.BytesPerSec
	}
	return func(backend string, size int) (float64, error) {
		v, ok := bps[backend][size]
		if !ok {
			return 0, fmt.Errorf("%s at %d bytes: %w", backend, size, threshold.ErrBackendUnavailable)
		}
		return v, nil
	}
}

// tuneBackends are the backends package threshold can put in a table, and
// the eager path, among those that work here.
func (o *options) tuneBackends() (run []string, skipped []error, err error) {
	candidates := []string{string(threshold.Eager)}
	for _, b := range threshold.Backends {
		candidates = append(candidates, string(b))
	}
	if o.backends != "" {
		candidates = strings.Split(o.backends, ",")
	}
	avail := o.availability()
	for _, name := range candidates {
		name = strings.TrimSpace(name)
		if !threshold.Backend(name).Valid() {
			return nil, nil, usagef("--backends: tune measures the selector's backends (eager, %s), not %q", strings.Join(backendNames(), ", "), name)
		}
		if err := avail[name]; err != nil {
			if o.backends != "" {
				return nil, nil, fmt.Errorf("--backends: %w", err)
			}
			skipped = append(skipped, err)
			continue
		}
		run = append(run, name)
	}
	return run, skipped, nil
}

func backendNames() []string {
	var s []string
	for _, b := range threshold.Backends {
		s = append(s, string(b))
	}
	return s
}

func toThreshold(names []string) []threshold.Backend {
	out := make([]threshold.Backend, len(names))
	for i, n := range names {
		out[i] = threshold.Backend(n)
	}
	return out
}

func tableIndex(f *threshold.TuningFile, shared bool) int {
	for i, t := range f.Tables {
		if t.SharedCache == shared && t.Concurrent <= 1 {
			return i
		}
	}
	return 0
}

func describeTuned(tt threshold.TunedTable, largest int) string {
	var parts []string
	switch {
	case tt.LMTMin > int64(largest):
		return "eager won at every measured size, up to " + units.Format(largest)
	case tt.LMTMin > 0:
		parts = append(parts, "eager below "+units.Format(int(tt.LMTMin)))
	}
	for _, r := range tt.Rules {
		parts = append(parts, fmt.Sprintf("%s from %s", r.Backend, units.Format(int(r.From))))
	}
	return strings.Join(parts, ", ")
}

// writeVerdicts replays the measured points through the formula's table
// and the tuned one (threshold.Compare) and prints, per size, what each
// picks and how close it comes to the best backend measured.
func writeVerdicts(w io.Writer, topo *topology.Topology, cpus [2]int, apart bool, file *threshold.TuningFile, points []threshold.Point) error {
	env := threshold.Env{Topology: topo, Placement: threshold.Placement{Sender: cpus[0], Receiver: cpus[1], JobCPUs: cpus[:]}}
	if apart {
		env.Apart = true // as auto would file them
	}
	formula, err := threshold.Build(env)
	if err != nil {
		return err
	}
	env.Tuning = file
	tuned, err := threshold.Build(env)
	if err != nil {
		return err
	}
	fv, ferr := threshold.Compare(points, formula)
	tv, err := threshold.Compare(points, tuned)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tbest measured\tGB/s\ttuned choice\tof best\tformula choice\tof best\t")
	for i, v := range tv {
		f := "not measured\t-"
		if ferr == nil {
			f = fmt.Sprintf("%s\t%.0f%%", fv[i].Chosen, 100*fv[i].Ratio())
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%.0f%%\t%s\t\n", units.Format(v.Size), v.Best, v.BestBps/1e9, v.Chosen, 100*v.Ratio(), f)
	}
	if ferr != nil {
		fmt.Fprintf(tw, "formula\t%v\t\t\t\t\t\t\n", ferr)
	}
	return tw.Flush()
}
