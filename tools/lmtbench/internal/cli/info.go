package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/shm"
	"github.com/knemesis/knemesis/threshold"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/topology"
)

// placementMethod says how a run files its samples near or far.
var placementMethod = fmt.Sprintf("a run files samples near/far only where its own readings split at a gap of %.1f× (else one class, %q), never by a fixed line", machine.GapRatio, machine.All)

func runInfo(_ context.Context, o *options, stdout, _ io.Writer) error {
	return writeInfo(stdout, o, true)
}

// writeInfo prints the machine, the placement right now and every
// backend's status. full adds the one-line description of each backend.
func writeInfo(w io.Writer, o *options, full bool) error {
	f := machine.Detect()
	fmt.Fprintf(w, "machine:   %s, %d CPUs usable (%s), kernel %s, %s\n", f.CPUModel, len(f.CPUs), topology.CPUSet(f.CPUs).String(), f.Kernel, f.Go)
	fmt.Fprintf(w, "caches:    %s\n", f.Caches)
	fmt.Fprintf(w, "shm:       %s\n", shmUse(len(f.CPUs)))
	writeShm(w)
	writeMemory(w)
	switch probe := o.probePath(); probe {
	case "":
		fmt.Fprintln(w, "placement: not probed (--placement-probe none)")
	case machine.Builtin:
		p := harness.ProbePlacement(context.Background())
		fmt.Fprintf(w, "placement: %.3f µs cache-line one-way now (built-in probe between two processes); %s\n", p.LatencyUs, placementMethod)
	default:
		p := machine.Probe(probe)
		fmt.Fprintf(w, "placement: %.3f µs cache-line one-way now (%s); %s\n", p.LatencyUs, probe, placementMethod)
	}
	fmt.Fprintln(w, "backends (each checked by moving one verified 64 KiB message between two processes):")
	avail := o.availability()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, b := range engine.All() {
		status := "works"
		if err := avail[b.Name]; err != nil {
			status = "no: " + engine.Explain(err)
		}
		if full {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", b.Name, b.Summary, status)
		} else {
			fmt.Fprintf(tw, "  %s\t%s\n", b.Name, status)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !full {
		return nil
	}
	if err := writeSelector(w, o); err != nil {
		return err
	}
	writeLearned(w, avail)
	return nil
}

// availability checks every backend: the static check, then a real job
// of two processes that opens the engine (the backend's own checks against
// its peer) and moves one 64 KiB message each way, verified byte by byte.
// Results are kept for the rest of the run.
func (o *options) availability() map[string]error {
	if o.avail != nil {
		return o.avail
	}
	o.avail = map[string]error{}
	cpus, err := o.pinning(2)
	if err != nil {
		cpus = nil
	}
	for _, b := range engine.All() {
		if err := b.Check(); err != nil {
			o.avail[b.Name] = err
			continue
		}
		spec := harness.Spec{Mode: harness.PingPong, Backend: b.Name, Sizes: []int{64 << 10}, Iters: 1, Samples: 1, CPUs: cpus}
		o.avail[b.Name] = harness.Run(context.Background(), spec, o.timeout, func(harness.Sample) {})
	}
	return o.avail
}

// writeSelector prints what package threshold decides for the pair of
// CPUs the benchmark would use: thresholds, where each came from, and the
// size→backend table.
func writeSelector(w io.Writer, o *options) error {
	cpus, err := o.pinning(2)
	if err != nil {
		return err
	}
	if cpus == nil {
		cpus = []int{0, 1}
	}
	env := threshold.Env{Placement: threshold.Placement{Sender: cpus[0], Receiver: cpus[1], JobCPUs: cpus}}
	info, err := threshold.Load(threshold.Config{Env: env})
	if err != nil {
		fmt.Fprintf(w, "selector:  unavailable: %v\n", err)
		return nil
	}
	fmt.Fprintf(w, "selector (package threshold) for cpus %d→%d:\n", cpus[0], cpus[1])
	var b strings.Builder
	if err := info.Describe(&b); err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if !info.Table.Shared {
		return nil
	}
	// auto times a cache line between the ranks at Attach: a pair
	// the topology says shares a cache may still be measured apart.
	env.Apart = true
	apart, err := info.For(env)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "  measured apart (package auto finds the pair's cache line in the slow one of two regimes):")
	fmt.Fprintf(w, "    < %s  eager\n", threshold.FormatSize(apart.Table.LMTMin.Bytes))
	for _, r := range apart.Table.Rules {
		fmt.Fprintf(w, "    %s  %s\n", r.Range(), r.Backend)
	}
	return nil
}

// writeLearned says which methods package auto's Learner weighs, per peer
// and size class, starting from the table's choice: those that work here,
// then those that do not.
func writeLearned(w io.Writer, avail map[string]error) {
	var here, not []string
	for _, b := range auto.LearnedCandidates() {
		if err, checked := avail[string(b)]; b == threshold.Eager || checked && err == nil {
			here = append(here, string(b))
		} else {
			not = append(not, string(b))
		}
	}
	fmt.Fprintf(w, "  auto's Learner weighs, per peer and size class, from the table's choice: %s", strings.Join(here, " "))
	if len(not) > 0 {
		fmt.Fprintf(w, " (not here: %s)", strings.Join(not, " "))
	}
	fmt.Fprintln(w)
}

// shmUse says how much shared memory a job takes, for a few job sizes
// (one rank per usable CPU among them): the nemesis segment and, when
// every pair exchanges large messages through the shm LMT, its rings (in
// /dev/shm) and its per-rank pools (memfd); and how much /dev/shm is free.
func shmUse(cpus int) string {
	sizes := []int{2, 64, 192}
	if !slices.Contains(sizes, cpus) && cpus > 1 {
		sizes = append(sizes, cpus)
		slices.Sort(sizes)
	}
	f := shm.FootprintOf(lmt.Config{})
	var b strings.Builder
	fmt.Fprintf(&b, "default geometry; segment + shm LMT rings (%d KiB per ordered pair, in /dev/shm) + pools (%.1f MiB per rank, memfd), all pairs exchanging large messages:",
		f.Ring>>10, float64(f.Pool)/(1<<20))
	for _, n := range sizes {
		seg, err := nemesis.SegmentSize(n, nil)
		if err != nil {
			continue
		}
		rings := f.Job(n) - uint64(n)*f.Pool
		fmt.Fprintf(&b, "\n             %3d ranks: %.1f MiB = %.1f segment + %.1f rings + %.1f pools",
			n, float64(seg+f.Job(n))/(1<<20), float64(seg)/(1<<20), float64(rings)/(1<<20), float64(uint64(n)*f.Pool)/(1<<20))
	}
	fmt.Fprintf(&b, "\n             a pair whose receiver cannot map the sender's pool (other PID or user namespace) adds a fixed ring of %d KiB", f.FixedRing>>10)
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil {
		return b.String() + "\n             /dev/shm: " + err.Error()
	}
	fmt.Fprintf(&b, "\n             /dev/shm %.1f GiB free (Join checks the segment against it and reserves it; the pools are reserved when the LMT engine is created)", float64(st.Bavail*uint64(st.Bsize))/(1<<30))
	return b.String()
}
