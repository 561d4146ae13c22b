package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
)

// A PMIx launcher (mpirun, srun) starts every rank of a job itself, on
// nodes of its choosing: lmtbench then measures between rank 0 and one
// partner of that job, through the nemesis endpoint every rank joins
// (package ofinet), instead of starting two processes of its own. The
// ranks on the partner's node are reached by the shared-memory segment
// with the automatic LMT attached, the others by the network module;
// each row names the path it measured.

// pairInJob measures spec between rank 0 and a partner of the job a PMIx
// launcher started: want, or when want < 0 the first rank on another
// node than rank 0's (rank 1 when every rank shares its node). Every
// other rank waits in a blocking call until rank 0 is done. nil when
// lmtbench is built without the tags ofi and pmix (job_ofi.go).
var pairInJob func(spec harness.Spec, net netChoice, want int) (*jobRun, error)

// netChoice is the network module's provider and the address it binds.
type netChoice struct{ provider, node string }

// jobRun is what one rank of the job measured: rank 0 holds the samples.
type jobRun struct {
	lead     bool
	samples  []harness.Sample
	path     string // how rank 0 reaches its partner: "shm", "net ofi tcp;ofi_rxm"
	provider string // the network module's, on a net path
	partner  int
}

// errNoNetmod is what a launcher-started lmtbench built without the
// network module says.
var errNoNetmod = errors.New(`started by a PMIx launcher (mpirun, srun), but this lmtbench has no network module: build the multi-node one with go build -tags "ofi pmix" ./tools/lmtbench (needs libfabric-dev and libpmix-dev)`)

// jobModes are the shapes that run across the ranks of a launcher's job.
var jobModes = map[string]bool{"pingpong": true, "bidir": true, "stream": true}

// runInJob is lmtbench under a PMIx launcher.
func runInJob(_ context.Context, o *options, stdout, _ io.Writer) error {
	if pairInJob == nil {
		return usageError{errNoNetmod}
	}
	spec, err := o.jobSpec()
	if err != nil {
		return err
	}
	run, err := pairInJob(spec, netChoice{o.provider, o.node}, o.peer)
	if err != nil || !run.lead {
		return err
	}
	var results []report.Result
	for _, size := range spec.Sizes {
		var at []harness.Sample
		for _, s := range run.samples {
			if s.Size == size {
				at = append(at, s)
			}
		}
		r := report.Aggregate(spec.Mode, spec.Backend, false, at)
		r.Path, r.Provider, r.Partner, r.Machine = run.path, run.provider, run.partner, o.facts()
		results = append(results, r)
	}
	if err := o.write(stdout, results); err != nil {
		return err
	}
	if o.plot != "" {
		title := fmt.Sprintf("lmtbench %s, rank 0 and rank %d (%s)", spec.Mode, run.partner, run.path)
		return report.WritePlot(o.plot, results, title)
	}
	return nil
}

// jobSpec checks the flags of a run under a launcher: what applies to
// processes lmtbench starts itself (pinning, the VM, backends other than
// the endpoint's) is refused by name.
func (o *options) jobSpec() (harness.Spec, error) {
	mode := o.command
	if !jobModes[mode] {
		what := mode
		if mode == "sweep" {
			what = "the default sweep"
		}
		return harness.Spec{}, usagef("%s measures this machine with processes of its own; under a PMIx launcher (mpirun, srun) lmtbench runs pingpong, bidir and stream between the job's ranks", what)
	}
	switch {
	case o.vm:
		return harness.Spec{}, usagef("--vm runs the guest of ci/; under a PMIx launcher the ranks are the launcher's")
	case o.backends != "" && o.backends != "auto":
		return harness.Spec{}, usagef("--backends %s: under a PMIx launcher lmtbench measures the nemesis endpoint (auto, through shared memory or the network module)", o.backends)
	case o.report != "":
		return harness.Spec{}, usagef("--report applies to runs on one machine; use --json or --csv under a PMIx launcher")
	case o.cpusSet:
		return harness.Spec{}, usagef("--cpus: under a PMIx launcher the launcher places the ranks (mpirun --bind-to core, srun --cpu-bind)")
	}
	if mode == "pingpong" && o.reuse {
		mode = harness.NetPIPE
	}
	sizes, err := o.sizeList(defaultSizes, 1)
	if err != nil {
		return harness.Spec{}, err
	}
	return harness.Spec{Mode: mode, Backend: "auto", Sizes: sizes, Iters: o.iters, SampleTime: o.sampleTime, Samples: o.samples, Warmup: o.warmup}, nil
}
