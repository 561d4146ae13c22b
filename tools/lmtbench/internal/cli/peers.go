package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/peers"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// lmtbench peers answers "should I use this instead of what I have?": the
// toolkit's rows (auto by default) and the stacks installed here, measured
// by their own benchmarks, at the same sizes, in the same shapes, pinned to
// the same CPUs, bracketed by the same placement probe and interleaved
// with them round by round (each round and size: the backends' samples,
// then one sample of every peer). Beside auto, the fastbox row (eager:
// Nemesis cells and fastboxes, no LMT) runs at the sizes a message fits a
// fastbox, so that the small-message path meets the peers on its own.
//
// Its run time is the peers' launches: one per peer, shape, size and
// round (an MPI launcher takes a fraction of a second, more than a
// sample), so the defaults keep two rounds, the rounds the ratios pair,
// and samples of --time each; the run prints how long it took.

const (
	defaultPeerSizes    = "8,64K,1M,4M"
	defaultPeerBackends = report.Auto + "," + report.Fastbox
	// peerSampleLimit bounds one peer sample: a launcher that hangs
	// (a server nobody connects to) must not hold the run for --timeout.
	peerSampleLimit = time.Minute
)

var peerShapes = []string{peers.PingPong, peers.NetPIPE, peers.Stream}

func runPeers(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	pp, err := o.peerPlan()
	if err != nil {
		return err
	}
	start := time.Now()
	o.measuresAt = pp.measuresAt
	steps := 0
	for _, shape := range pp.shapes {
		for _, size := range pp.sizes {
			for _, b := range pp.backends {
				if pp.measuresAt(b.Name, size) {
					steps += o.samples
					if o.copies {
						steps++
					}
				}
			}
			steps += len(pp.measuring(shape)) * o.samples
		}
	}
	bar := newProgress(stderr, o.progress, steps)
	defer bar.done()
	var all []report.Result
	var failed []error
	var copiesNote string
	probe := o.probePath()
	for _, shape := range pp.shapes {
		m := &peerMeasurer{o: o, probe: probe, cpus: pp.cpus, shape: shape, peers: pp.measuring(shape), bar: bar}
		o.alongside = m
		spec := harness.Spec{Mode: shape, Iters: o.iters, SampleTime: o.sampleTime, CPUs: pp.cpus, Probe: probe, Warmup: o.warmup}
		results, skipped, err := o.interleave(ctx, spec, pp.backends, pp.sizes, bar)
		o.alongside = nil
		if err != nil {
			return err
		}
		pp.skipped = append(pp.skipped, skipped...)
		failed = append(failed, m.failed...)
		if o.copies {
			// The toolkit's rows only: the probes count Go's copies and
			// the kernel's, not those inside the peers' C libraries.
			copiesNote = countCopies(ctx, o, results, bar)
		}
		all = append(all, results...)
		all = append(all, m.results(o.facts(), pp.sizes)...)
	}
	bar.done()
	report.CompareWithPeers(all)
	sortPeerResults(all)
	if err := o.writePeers(stdout, all); err != nil {
		return err
	}
	if o.plot != "" {
		f := o.facts()
		if err := report.WritePlot(o.plot, all, fmt.Sprintf("lmtbench peers on %s, kernel %s", f.CPUModel, f.Kernel)); err != nil {
			return err
		}
	}
	if err := o.writeReport(stdout, all, "lmtbench peers"); err != nil {
		return err
	}
	if !o.machineReadable() {
		if copiesNote != "" {
			fmt.Fprintln(stdout, copiesNote)
		}
		for _, why := range pp.skipped {
			fmt.Fprintf(stdout, "not measured: %v\n", why)
		}
		for _, why := range failed {
			fmt.Fprintf(stdout, "peer failed: %s\n", oneLine(why.Error()))
		}
		for _, why := range pp.missing {
			fmt.Fprintf(stdout, "not installed: %v\n", why)
		}
		fmt.Fprintf(stdout, "not packaged by Debian 12: %s\n", strings.Join(peers.Unpackaged, "; "))
		fmt.Fprintf(stdout, "run time: %v (%d shapes × %d sizes × %d rounds)\n", time.Since(start).Round(time.Second), len(pp.shapes), len(pp.sizes), o.samples)
	}
	return nil
}

// peerPlan is a checked lmtbench peers run.
type peerPlan struct {
	shapes   []string
	sizes    []int
	cpus     []int
	backends []engine.Backend
	skipped  []error // toolkit backends that cannot run here
	peers    []*peers.Peer
	missing  []error // peers not installed, with their package
}

// measuresAt says whether the toolkit's backend runs at size: the
// fastbox row only where a message fits a fastbox.
func (pp *peerPlan) measuresAt(backend string, size int) bool {
	return backend != report.Fastbox || size <= nemesis.DefaultFastboxPayload
}

func (pp *peerPlan) measuring(shape string) []*peers.Peer {
	var out []*peers.Peer
	for _, p := range pp.peers {
		if p.Measures(shape) {
			out = append(out, p)
		}
	}
	return out
}

// peerPlan checks every input of lmtbench peers before anything runs.
func (o *options) peerPlan() (*peerPlan, error) {
	if o.procs != 2 {
		return nil, usagef("peers runs between 2 processes; --procs/-n %d applies to alltoall", o.procs)
	}
	pp := &peerPlan{shapes: peerShapes}
	if o.shapes != "" {
		pp.shapes = nil
		for _, s := range strings.Split(o.shapes, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(peerShapes, s) {
				return nil, usagef("--shapes: unknown shape %q (shapes: %s)", s, strings.Join(peerShapes, ", "))
			}
			if !slices.Contains(pp.shapes, s) {
				pp.shapes = append(pp.shapes, s)
			}
		}
	}
	var err error
	if pp.sizes, err = o.sizeList(defaultPeerSizes, 1); err != nil {
		return nil, err
	}
	if pp.cpus, err = o.pinning(2); err != nil {
		return nil, err
	}
	if pp.cpus != nil && pp.cpus[0] == pp.cpus[1] {
		return nil, usagef("peers: --cpus %s puts both processes on CPU %d; the MPI launchers bind one rank per CPU (use apart, a list of two CPUs, or none)", o.cpus, pp.cpus[0])
	}
	if o.backends == "" {
		o.backends = defaultPeerBackends
	}
	if pp.backends, pp.skipped, err = o.backendList(); err != nil {
		return nil, err
	}
	named := o.peerNames != ""
	list := peers.All()
	if named {
		if list, err = peers.Lookup(o.peerNames); err != nil {
			return nil, usagef("--peers: %v", err)
		}
	}
	for _, p := range list {
		switch err := p.Missing(); {
		case err != nil && named:
			return nil, fmt.Errorf("--peers: %w", err)
		case err != nil:
			pp.missing = append(pp.missing, err)
		default:
			pp.peers = append(pp.peers, p)
		}
	}
	return pp, nil
}

// peerMeasurer takes the peers' samples of one shape, alongside the
// backends' in interleave (rowsAlongside).
type peerMeasurer struct {
	o      *options
	probe  string
	cpus   []int
	shape  string
	peers  []*peers.Peer
	bar    *progress
	failed []error

	gone  map[string]bool
	taken map[string]map[int][]harness.Sample
	last  map[string]map[int]peers.Measurement
	cmds  map[string]map[int][]string // command of each sample, in the order of samples
}

func (m *peerMeasurer) round(ctx context.Context, round, size int) error {
	if m.taken == nil {
		m.gone, m.taken = map[string]bool{}, map[string]map[int][]harness.Sample{}
		m.last, m.cmds = map[string]map[int]peers.Measurement{}, map[string]map[int][]string{}
	}
	for _, p := range m.peers {
		if m.gone[p.Name] {
			continue
		}
		if m.taken[p.Name] == nil {
			m.taken[p.Name], m.last[p.Name], m.cmds[p.Name] = map[int][]harness.Sample{}, map[int]peers.Measurement{}, map[int][]string{}
		}
		j := peers.Job{Shape: m.shape, Size: size, CPUs: m.cpus, Root: os.Geteuid() == 0,
			Iters: peers.Iterations(m.shape, size, m.o.sampleTime, m.last[p.Name][size])}
		if m.o.iters > 0 {
			j.Iters = m.o.iters
		}
		before := placementNow(ctx, m.probe, m.cpus)
		sctx, cancel := context.WithTimeout(ctx, min(m.o.timeout, peerSampleLimit))
		got, inv, err := p.Run(sctx, j)
		cancel()
		after := placementNow(ctx, m.probe, m.cpus)
		m.bar.step(p.Name + " " + units.Format(size))
		if err != nil {
			// One stack that fails here (a transport refused, a
			// launcher's complaint) must not cost the others' figures:
			// it is dropped and its error printed with the table.
			m.failed, m.gone[p.Name] = append(m.failed, err), true
			continue
		}
		m.last[p.Name][size] = got
		m.taken[p.Name][size] = append(m.taken[p.Name][size], harness.Sample{
			Size: size, Iterations: got.Iterations, Messages: got.Messages, Seconds: got.Seconds(),
			Before: before, After: after, Round: round,
		})
		m.cmds[p.Name][size] = append(m.cmds[p.Name][size], inv.String())
	}
	return nil
}

// samples returns every peer's samples, per size.
func (m *peerMeasurer) samples() []map[int][]harness.Sample {
	var out []map[int][]harness.Sample
	for _, p := range m.peers {
		if bySize := m.taken[p.Name]; bySize != nil {
			out = append(out, bySize)
		}
	}
	return out
}

// results aggregates each peer's samples as the toolkit's are, and
// attaches the command line of the median sample. A peer that failed
// keeps the rows of the sizes it measured before (its error is printed
// with the table): a launcher killed at 4 MiB on a loaded machine does
// not void its 8-byte figures.
func (m *peerMeasurer) results(f machine.Facts, sizes []int) []report.Result {
	var out []report.Result
	for _, p := range m.peers {
		for _, size := range sizes {
			ss := m.taken[p.Name][size]
			if len(ss) == 0 {
				continue
			}
			r := report.Aggregate(m.shape, p.Name, false, ss)
			r.CPUs, r.Machine = m.cpus, f
			i := slices.IndexFunc(ss, func(s harness.Sample) bool { return s.Seconds == r.Seconds && s.Iterations == r.Iterations })
			r.Peer = &report.PeerInfo{Stack: p.Stack, Tool: p.Tool, Package: p.Package, Command: m.cmds[p.Name][size][max(i, 0)]}
			out = append(out, r)
		}
	}
	return out
}

// placementNow is one reading of the placement probe for a pair of
// processes on cpus: the external probe, or the built-in one run between
// two ranks pinned there.
func placementNow(ctx context.Context, probe string, cpus []int) machine.Placement {
	switch probe {
	case "":
		return machine.Unknown
	case machine.Builtin:
		got := machine.Unknown
		spec := harness.Spec{Mode: harness.Placement, Probe: machine.Builtin, Samples: 1, CPUs: cpus}
		if err := harness.Run(ctx, spec, 2*machine.ProbeTimeout+5*time.Second, func(s harness.Sample) { got = s.Before }); err != nil {
			return machine.Unknown
		}
		return got
	}
	return machine.Probe(probe)
}

// sortPeerResults orders rows by shape (as peerShapes), size, then the
// toolkit's backends as registered, then the peers as peers.All lists them.
func sortPeerResults(results []report.Result) {
	order := map[string]int{}
	for i, n := range engine.Names() {
		order[n] = i
	}
	base := len(order)
	for i, n := range peers.Names() {
		order[n] = base + i
	}
	slices.SortStableFunc(results, func(a, b report.Result) int {
		if a.Mode != b.Mode {
			return slices.Index(peerShapes, a.Mode) - slices.Index(peerShapes, b.Mode)
		}
		if a.Size != b.Size {
			return a.Size - b.Size
		}
		return order[a.Backend] - order[b.Backend]
	})
}

func (o *options) writePeers(w io.Writer, results []report.Result) error {
	if o.machineReadable() {
		return o.write(w, results)
	}
	return report.WritePeers(w, results)
}
