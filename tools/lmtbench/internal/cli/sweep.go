package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

const defaultSizes = "4K-64M"

// runSweep is lmtbench without a command: a short account of the machine,
// then the ping-pong sweep.
func runSweep(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	return measure(ctx, harness.PingPong, o, stdout, stderr, !o.machineReadable())
}

func (o *options) machineReadable() bool { return o.json || o.csv || o.benchfmt }

// runMode measures one shape over the chosen backends and sizes.
func runMode(mode string) command {
	return func(ctx context.Context, o *options, stdout, stderr io.Writer) error {
		return measure(ctx, mode, o, stdout, stderr, false)
	}
}

// measure checks every input first, so that a mistake costs no time, then
// prints the machine account when header is set, and runs the jobs.
func measure(ctx context.Context, mode string, o *options, stdout, stderr io.Writer, header bool) error {
	if mode == harness.PingPong && o.reuse {
		mode = harness.NetPIPE
	}
	{
		if o.procs != 2 {
			return usagef("%s runs between 2 processes; --procs/-n %d applies to alltoall", mode, o.procs)
		}
		def, minSize := defaultSizes, 1
		switch mode {
		case harness.Pollution:
			def = defaultPollutionSizes
		case harness.Latency:
			def, minSize = defaultLatencySizes, 0
		}
		sizes, err := o.sizeList(def, minSize)
		if err != nil {
			return err
		}
		cpus, err := o.pinning(2)
		if err != nil {
			return err
		}
		iters, workingSet := o.iters, 0
		if mode == harness.Pollution {
			if workingSet, err = o.pollutionWorkingSet(cpus); err != nil {
				return err
			}
			if iters == 0 {
				iters = defaultPollutionRounds
			}
		}
		if mode == harness.Latency && o.backends == "" {
			o.backends = defaultLatencyBackends
		}
		backends, skipped, err := o.backendList()
		if err != nil {
			return err
		}
		if header {
			if err := writeInfo(stdout, o, false); err != nil {
				return err
			}
		}
		facts := o.facts()
		probe := o.probePath()
		steps := len(backends) * len(sizes) * o.samples
		countsCopies := o.copies && mode != harness.Pollution
		if countsCopies {
			steps += len(backends) * len(sizes)
		}
		bar := newProgress(stderr, o.progress, steps)
		var results []report.Result
		for _, b := range backends {
			spec := harness.Spec{
				Mode: mode, Backend: b.Name, Sizes: sizes, Iters: iters,
				SampleTime: o.sampleTime, Samples: o.samples, CPUs: cpus, Probe: probe, WorkingSet: workingSet,
			}
			r, err := runSpec(ctx, o, spec, b.Reference, bar)
			var u *engine.Unavailable
			if errors.As(err, &u) && o.backends == "" {
				skipped = append(skipped, err)
				continue
			}
			if err != nil {
				bar.done()
				if u != nil {
					return fmt.Errorf("--backends: %w", err)
				}
				return err
			}
			results = append(results, r...)
		}
		var copiesNote string
		if countsCopies {
			copiesNote = countCopies(ctx, o, results, bar)
		}
		bar.done()
		sortResults(results)
		if err := o.write(stdout, results); err != nil {
			return err
		}
		if o.plot != "" {
			title := fmt.Sprintf("lmtbench %s on %s, kernel %s", mode, facts.CPUModel, facts.Kernel)
			if err := report.WritePlot(o.plot, results, title); err != nil {
				return err
			}
		}
		if !o.machineReadable() {
			for _, why := range skipped {
				fmt.Fprintf(stdout, "not measured: %v\n", why)
			}
			if copiesNote != "" {
				fmt.Fprintln(stdout, copiesNote)
			}
			if probe == "" {
				fmt.Fprintln(stdout, "placement: unknown — no placement probe (../shared/tools/placement-probe); samples were not bracketed")
			}
		}
		return nil
	}
}

// sortResults orders results by mode, size, then backend as registered, so
// that each size's rows sit together in every output.
func sortResults(results []report.Result) {
	order := map[string]int{}
	for i, n := range engine.Names() {
		order[n] = i
	}
	slices.SortStableFunc(results, func(a, b report.Result) int {
		if a.Mode != b.Mode {
			return strings.Compare(a.Mode, b.Mode)
		}
		if a.Size != b.Size {
			return a.Size - b.Size
		}
		return order[a.Backend] - order[b.Backend]
	})
}

func (o *options) write(w io.Writer, results []report.Result) error {
	switch {
	case o.json:
		return report.WriteJSON(w, results)
	case o.csv:
		return report.WriteCSV(w, results)
	case o.benchfmt:
		return report.WriteBenchfmt(w, results)
	}
	return report.WriteTable(w, results)
}

func (o *options) sizeList(def string, minSize int) ([]int, error) {
	s := o.sizes
	if s == "" {
		s = def
	}
	sizes, err := units.ParseList(s, minSize)
	if err != nil {
		return nil, usagef("--sizes: %v", err)
	}
	return sizes, nil
}

// backendList resolves --backends. Without it, every backend that works
// here runs and the others are returned as reasons; naming one that does
// not work is an error carrying its reason and fix.
func (o *options) backendList() (run []engine.Backend, skipped []error, err error) {
	if o.backends == "" || o.backends == "all" {
		avail := o.availability()
		for _, b := range engine.All() {
			if err := avail[b.Name]; err != nil {
				skipped = append(skipped, err)
			} else {
				run = append(run, b)
			}
		}
		return run, skipped, nil
	}
	for _, name := range strings.Split(o.backends, ",") {
		name = strings.TrimSpace(name)
		b, err := engine.Lookup(name)
		if err != nil {
			return nil, nil, usagef("--backends: %v", err)
		}
		if err := b.Check(); err != nil {
			return nil, nil, fmt.Errorf("--backends: %w", err)
		}
		if !slices.ContainsFunc(run, func(x engine.Backend) bool { return x.Name == b.Name }) {
			run = append(run, b)
		}
	}
	return run, nil, nil
}

// pinning resolves --cpus to one CPU per rank, or nil for unpinned.
func (o *options) pinning(procs int) ([]int, error) {
	allowed, err := machine.AllowedCPUs()
	if err != nil {
		return nil, err
	}
	switch o.cpus {
	case "none":
		return nil, nil
	case "same":
		cpus := make([]int, procs)
		for i := range cpus {
			cpus[i] = allowed[0]
		}
		return cpus, nil
	case "apart":
		if len(allowed) < procs {
			return nil, usagef("--cpus apart: %d processes need %d CPUs, this process may use %d (%s); use --cpus same", procs, procs, len(allowed), cpuRange(allowed))
		}
		return allowed[:procs], nil
	case "shared", "unshared":
		if procs != 2 {
			return nil, usagef("--cpus %s places a pair of processes, the job has %d", o.cpus, procs)
		}
		a, b, _, err := machine.CachePair(o.cpus == "shared")
		if err != nil {
			return nil, fmt.Errorf("--cpus %s: %w; use --cpus apart, same or a list like 0,1", o.cpus, err)
		}
		return []int{a, b}, nil
	}
	var cpus []int
	for _, f := range strings.Split(o.cpus, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, usagef("--cpus %q: want apart, same, shared, unshared, none or a list of CPU numbers like 0,1", o.cpus)
		}
		if !slices.Contains(allowed, c) {
			return nil, usagef("--cpus %q: CPU %d is not one this process may use (%s)", o.cpus, c, cpuRange(allowed))
		}
		cpus = append(cpus, c)
	}
	if len(cpus) != procs {
		return nil, usagef("--cpus %q: name one CPU per process, %d of them", o.cpus, procs)
	}
	return cpus, nil
}

// cpuRange prints CPUs compactly: 0-3,6.
func cpuRange(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// runAlltoall checks the job can run here before saying what it needs.
func runAlltoall(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	allowed, err := machine.AllowedCPUs()
	if err != nil {
		return err
	}
	if o.procs < 2 {
		return usagef("alltoall -n %d: want at least 2 processes", o.procs)
	}
	if o.procs > len(allowed) {
		return usagef("alltoall -n %d: more processes than this machine can run at once (%d CPUs: %s); ranks that wait by spinning would measure the scheduler, not the transfer", o.procs, len(allowed), cpuRange(allowed))
	}
	return missing("alltoall", "an N-process transfer engine from package lmt (branch lmt)")(ctx, o, stdout, stderr)
}

// countCopies adds copy counts to results when the probes load, and
// otherwise returns the line saying why they are missing.
func countCopies(ctx context.Context, o *options, results []report.Result, bar *progress) string {
	c, err := openCopyCounter()
	if err != nil {
		return "copies: not counted: " + oneLine(err.Error())
	}
	defer c.Close()
	if err := c.addCopies(ctx, o, results, bar); err != nil {
		return "copies: not counted: " + oneLine(err.Error())
	}
	return ""
}

// latency runs the small-message path (Nemesis cells and fastbox), the
// automatic choice (which keeps these sizes eager) and the reference, from
// 0 bytes to one cell's payload.
var (
	defaultLatencySizes    = fmt.Sprintf("0-4K,%d", nemesis.DefaultCellSize-64)
	defaultLatencyBackends = "eager,auto,memcpy"
)

const (
	defaultPollutionSizes  = "64K,1M,4M"
	defaultPollutionRounds = 20
)

// pollutionWorkingSet is --working-set, else the receiving rank's L2: the
// private cache a receive-side copy fills first (the paper's Table 2
// counts the receiver's cache misses).
func (o *options) pollutionWorkingSet(cpus []int) (int, error) {
	if o.workingSet != "" {
		n, err := units.ParseSize(o.workingSet)
		if err != nil {
			return 0, usagef("--working-set: %v", err)
		}
		if n < 128 {
			return 0, usagef("--working-set %s: want at least two 64-byte cache lines", o.workingSet)
		}
		return n, nil
	}
	receiver := 0
	if len(cpus) > 1 {
		receiver = cpus[1]
	}
	topo, err := machine.Topology()
	if err != nil {
		return 0, fmt.Errorf("pollution: no cache topology to size the working set (%v); pass --working-set", err)
	}
	for _, c := range topo.CachesOf(receiver) {
		if c.Level == 2 && c.HoldsData() {
			return int(c.Size), nil
		}
	}
	return 0, fmt.Errorf("pollution: CPU %d has no L2 cache in the topology; pass --working-set", receiver)
}

// runSpec runs one job and aggregates its samples per size.
func runSpec(ctx context.Context, o *options, spec harness.Spec, reference bool, bar *progress) ([]report.Result, error) {
	bySize := map[int][]harness.Sample{}
	err := harness.Run(ctx, spec, o.timeout, func(s harness.Sample) {
		bySize[s.Size] = append(bySize[s.Size], s)
		bar.step(spec.Backend + " " + units.Format(s.Size))
	})
	if err != nil {
		return nil, err
	}
	results := make([]report.Result, 0, len(spec.Sizes))
	for _, size := range spec.Sizes {
		r := report.Aggregate(spec.Mode, spec.Backend, reference, bySize[size])
		r.CPUs, r.Machine = spec.CPUs, o.facts()
		results = append(results, r)
	}
	return results, nil
}

// facts are the machine facts, detected once per run.
func (o *options) facts() machine.Facts {
	if o.machine == nil {
		f := machine.Detect()
		o.machine = &f
	}
	return *o.machine
}
