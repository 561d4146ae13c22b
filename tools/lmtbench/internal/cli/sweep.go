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
	"github.com/knemesis/knemesis/tools/lmtbench/internal/pagebuf"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
	"github.com/knemesis/knemesis/topology"
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

// plan is a checked measurement: everything the user asked for, resolved.
type plan struct {
	mode              string
	sizes, cpus       []int
	iters, workingSet int
	backends          []engine.Backend
	skipped           []error // backends that cannot run here, with why
}

// plan checks every input of a two-rank mode, so that a mistake costs no
// measuring time, and resolves the defaults of the mode.
func (o *options) plan(mode string) (*plan, error) {
	if o.procs != 2 {
		return nil, usagef("%s runs between 2 processes; --procs/-n %d applies to alltoall", mode, o.procs)
	}
	def, minSize := defaultSizes, 1
	if o.hugepages {
		def = defaultHugepagesSizes
	}
	switch mode {
	case harness.Pollution:
		def = defaultPollutionSizes
	case harness.Latency:
		def, minSize = defaultLatencySizes, 0
	}
	p := &plan{mode: mode, iters: o.iters}
	var err error
	if p.sizes, err = o.sizeList(def, minSize); err != nil {
		return nil, err
	}
	if p.cpus, err = o.pinning(2); err != nil {
		return nil, err
	}
	if mode == harness.Pollution {
		if p.workingSet, err = o.pollutionWorkingSet(p.cpus); err != nil {
			return nil, err
		}
		if p.iters == 0 {
			p.iters = defaultPollutionRounds
		}
	}
	if mode == harness.Latency && o.backends == "" {
		o.backends = defaultLatencyBackends
	}
	if p.backends, p.skipped, err = o.backendList(); err != nil {
		return nil, err
	}
	if o.hugepages {
		p.backends = withMemcpyForCMA(p.backends)
	}
	return p, nil
}

// measure runs a two-rank mode over the chosen backends and sizes; header
// prints the machine account first (the default command).
func measure(ctx context.Context, mode string, o *options, stdout, stderr io.Writer, header bool) error {
	if mode == harness.PingPong && o.reuse {
		mode = harness.NetPIPE
	}
	p, err := o.plan(mode)
	if err != nil {
		return err
	}
	if header && !o.hugepages {
		if err := writeInfo(stdout, o, false); err != nil {
			return err
		}
	}
	if o.hugepages {
		var line string
		o.pageKinds, line = o.hugepageKinds(slices.Max(p.sizes))
		if !o.machineReadable() {
			fmt.Fprintln(stdout, line)
		}
	}
	probe := o.probePath()
	countsCopies := o.copies && mode != harness.Pollution && !o.hugepages
	steps := len(p.backends) * len(p.sizes) * o.samples * max(1, len(o.pageKinds))
	if countsCopies {
		steps += len(p.backends) * len(p.sizes)
	}
	bar := newProgress(stderr, o.progress, steps)
	defer bar.done()
	spec := harness.Spec{Mode: mode, Iters: p.iters, SampleTime: o.sampleTime, CPUs: p.cpus, Probe: probe, WorkingSet: p.workingSet, Warmup: o.warmup}
	results, skipped, err := o.interleave(ctx, spec, p.backends, p.sizes, bar)
	if err != nil {
		return err
	}
	p.skipped = append(p.skipped, skipped...)
	var copiesNote string
	if countsCopies {
		copiesNote = countCopies(ctx, o, results, bar)
	}
	bar.done()
	sortResults(results)
	if o.hugepages && !o.machineReadable() {
		writeHugepages(stdout, results)
	} else if err := o.write(stdout, results); err != nil {
		return err
	}
	if o.plot != "" {
		f := o.facts()
		if err := report.WritePlot(o.plot, results, fmt.Sprintf("lmtbench %s on %s, kernel %s", mode, f.CPUModel, f.Kernel)); err != nil {
			return err
		}
	}
	if err := o.writeReport(stdout, results, "lmtbench "+mode); err != nil {
		return err
	}
	if !o.machineReadable() {
		for _, why := range p.skipped {
			fmt.Fprintf(stdout, "not measured: %v\n", why)
		}
		if copiesNote != "" {
			fmt.Fprintln(stdout, copiesNote)
		}
		switch probe {
		case "":
			fmt.Fprintln(stdout, "placement: unknown — --placement-probe none; samples were not bracketed")
		case machine.Builtin:
			fmt.Fprintf(stdout, "placement: built-in probe (a cache line timed between the two ranks around each sample): %s\n", o.regimes)
		default:
			fmt.Fprintf(stdout, "placement: %s around each sample: %s\n", probe, o.regimes)
		}
	}
	return nil
}

// unavailable sorts a job's failure: a backend the job found unusable with
// its peer is skipped when the user did not name it, and otherwise fails
// the run as a --backends error with its reason and fix.
func (o *options) unavailable(err error) (skip bool, _ error) {
	var u *engine.Unavailable
	switch {
	case !errors.As(err, &u):
		return false, err
	case o.backends == "":
		return true, err
	}
	return false, fmt.Errorf("--backends: %w", err)
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
			switch err := avail[b.Name]; {
			case err != nil:
				skipped = append(skipped, err)
			case !b.OnRequest:
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
			return nil, usagef("--cpus apart: %d processes need %d CPUs, this process may use %d (%s); use --cpus same", procs, procs, len(allowed), topology.CPUSet(allowed).String())
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
			return nil, usagef("--cpus %q: CPU %d is not one this process may use (%s)", o.cpus, c, topology.CPUSet(allowed).String())
		}
		cpus = append(cpus, c)
	}
	if len(cpus) != procs {
		return nil, usagef("--cpus %q: name one CPU per process, %d of them", o.cpus, procs)
	}
	return cpus, nil
}

// runAlltoall is `lmtbench alltoall -n N`: N processes, each sending a
// message to every other at once, over every backend that works here
// (§4.4 of Buntinas, Goglin, Goodell, Mercier and Moreaud, ICPP 2009,
// where concurrent transfers lower the useful thresholds).
func runAlltoall(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	allowed, err := machine.AllowedCPUs()
	if err != nil {
		return err
	}
	if o.procs < 2 {
		return usagef("alltoall -n %d: want at least 2 processes", o.procs)
	}
	if o.procs > len(allowed) {
		return usagef("alltoall -n %d: more processes than this machine can run at once (%d CPUs: %s); ranks that wait by spinning would measure the scheduler, not the transfer", o.procs, len(allowed), topology.CPUSet(allowed).String())
	}
	sizes, err := o.sizeList(defaultAlltoallSizes, 1)
	if err != nil {
		return err
	}
	cpus, err := o.pinning(o.procs)
	if err != nil {
		return err
	}
	backends, skipped, err := o.backendList()
	if err != nil {
		return err
	}
	backends = slices.DeleteFunc(backends, func(b engine.Backend) bool { return b.Reference && o.backends == "" })
	if i := slices.IndexFunc(backends, func(b engine.Backend) bool { return b.Reference }); i >= 0 {
		return usagef("alltoall: %s is a two-process reference and has no alltoall", backends[i].Name)
	}
	bar := newProgress(stderr, o.progress, len(backends)*len(sizes)*o.samples)
	spec := harness.Spec{Mode: harness.Alltoall, Iters: o.iters, Procs: o.procs, SampleTime: o.sampleTime, CPUs: cpus, Probe: o.probePath(), Warmup: o.warmup}
	results, more, err := o.interleave(ctx, spec, backends, sizes, bar)
	bar.done()
	if err != nil {
		return err
	}
	skipped = append(skipped, more...)
	sortResults(results)
	if err := o.write(stdout, results); err != nil {
		return err
	}
	if o.plot != "" {
		f := o.facts()
		if err := report.WritePlot(o.plot, results, fmt.Sprintf("lmtbench alltoall -n %d on %s, kernel %s", o.procs, f.CPUModel, f.Kernel)); err != nil {
			return err
		}
	}
	if !o.machineReadable() {
		for _, why := range skipped {
			fmt.Fprintf(stdout, "not measured: %v\n", why)
		}
	}
	return nil
}

const defaultAlltoallSizes = "4K-4M"

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

// interleave measures every backend at every size in --samples rounds. A
// round takes, size after size, one sample of each backend back to back,
// each in a job of its own (a job starts in milliseconds), so that the
// backends' samples of a round and size lie a fraction of a second apart:
// on a machine whose placement changes every few seconds they mostly share
// one, which is what report.CompareAuto needs to compare them. Running each
// backend's whole sweep in one job instead would put seconds between them.
// The first round calibrates each backend's iteration count per size (when
// --iters does not fix it) and the later rounds reuse it. A backend found
// unavailable is skipped for the rest of the run, with its reason.
func (o *options) interleave(ctx context.Context, tmpl harness.Spec, backends []engine.Backend, sizes []int, bar *progress) ([]report.Result, []error, error) {
	// Each backend runs once per page kind (--hugepages: small and huge,
	// else the heap alone); the kinds of a backend alternate which goes
	// first from round to round, so that neither always follows the
	// other's job.
	kinds := o.pageKinds
	if len(kinds) == 0 {
		kinds = []pagebuf.Kind{pagebuf.Heap}
	}
	type entry struct {
		b    int // index in backends
		kind pagebuf.Kind
	}
	var entries []entry
	for i := range backends {
		for _, k := range kinds {
			entries = append(entries, entry{i, k})
		}
	}
	samples := make([]map[int][]harness.Sample, len(entries))
	iters := make([]map[int]int, len(entries))
	for i := range entries {
		samples[i], iters[i] = map[int][]harness.Sample{}, map[int]int{}
	}
	var skipped []error
	gone := make([]bool, len(backends))
	for round := range o.samples {
		for _, size := range sizes {
			for i := range entries {
				if round%2 == 1 && len(kinds) > 1 {
					// the same backend's kinds in reverse order
					k := i % len(kinds)
					i = i - k + len(kinds) - 1 - k
				}
				en := entries[i]
				b := backends[en.b]
				if gone[en.b] || o.measuresAt != nil && !o.measuresAt(b.Name, size) {
					continue
				}
				spec := tmpl
				spec.Backend, spec.Sizes, spec.Samples, spec.Pages = b.Name, []int{size}, 1, en.kind
				if spec.Iters == 0 {
					spec.Iters = iters[i][size]
				}
				err := harness.Run(ctx, spec, o.timeout, func(s harness.Sample) {
					s.Round = round
					samples[i][size] = append(samples[i][size], s)
					iters[i][size] = s.Iterations
					bar.step(strings.TrimSpace(b.Name + " " + string(en.kind) + " " + units.Format(size)))
				})
				if skip, err := o.unavailable(err); skip {
					skipped, gone[en.b] = append(skipped, err), true
				} else if err != nil {
					return nil, nil, err
				}
			}
			if o.alongside != nil {
				if err := o.alongside.round(ctx, round, size); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	// The rows measured alongside are filed by the same regimes, found
	// in every reading of the run: a peer and auto compared in "far"
	// must both have been far.
	all := slices.Clone(samples)
	if o.alongside != nil {
		all = append(all, o.alongside.samples()...)
	}
	o.regimes = classify(all)
	var results []report.Result
	for i, en := range entries {
		b := backends[en.b]
		if gone[en.b] {
			continue
		}
		for _, size := range sizes {
			if len(samples[i][size]) == 0 {
				continue // not measured at this size (measuresAt)
			}
			r := report.Aggregate(tmpl.Mode, b.Name, b.Reference, samples[i][size])
			r.CPUs, r.Machine, r.Pages = tmpl.CPUs, o.facts(), string(en.kind)
			if tmpl.Mode == harness.Alltoall {
				r.Procs = tmpl.Procs
			}
			results = append(results, r)
		}
	}
	if len(kinds) == 1 {
		report.CompareAuto(results)
	}
	return results, skipped, nil
}

// rowsAlongside measures rows of its own in interleave's rounds: after
// the backends' samples of each round and size, round takes its own;
// samples returns all it took, per row and size, for interleave to file
// their placement readings with the backends'.
type rowsAlongside interface {
	round(ctx context.Context, round, size int) error
	samples() []map[int][]harness.Sample
}

// classify files every placement reading of a run by the regimes the run's
// own readings show (machine.FindRegimes): near and far only where they
// split at a gap, else one class for all.
func classify(samples []map[int][]harness.Sample) machine.Regimes {
	var lat []float64
	for _, bySize := range samples {
		for _, ss := range bySize {
			for _, s := range ss {
				lat = append(lat, s.Before.LatencyUs, s.After.LatencyUs)
			}
		}
	}
	r := machine.FindRegimes(lat)
	for _, bySize := range samples {
		for _, ss := range bySize {
			for i := range ss {
				if ss[i].Before.LatencyUs > 0 {
					ss[i].Before.Class = r.Class(ss[i].Before.LatencyUs)
				}
				if ss[i].After.LatencyUs > 0 {
					ss[i].After.Class = r.Class(ss[i].After.LatencyUs)
				}
			}
		}
	}
	return r
}

// facts are the machine facts, detected once per run.
func (o *options) facts() machine.Facts {
	if o.machine == nil {
		f := machine.Detect()
		o.machine = &f
	}
	return *o.machine
}
