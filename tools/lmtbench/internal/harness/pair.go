package harness

import (
	"fmt"
	"io"
	"runtime"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
)

// Pair runs spec between two ranks of a job that lmtbench did not start:
// one a PMIx launcher (mpirun, srun) started across nodes. me is this
// rank's place in the pair (0 leads, 1 follows); e carries the payload to
// the other; to and from carry the harness's commands, one 24-byte record
// per Write and per Read (a message each, on a tag of their own). Rank 0
// hands each sample to emit. The samples are the ones Worker takes,
// verified, warmed up and calibrated alike, but never bracketed by a
// placement probe: the two ranks need not share a machine, so every
// reading is machine.Unknown.
func Pair(spec Spec, e engine.Engine, to io.Writer, from io.Reader, me int, emit func(Sample) error) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	switch spec.Mode {
	case PingPong, NetPIPE, Bidir, Stream:
	default:
		return fmt.Errorf("%s does not run across nodes; pingpong, bidir and stream do", spec.Mode)
	}
	if spec.Probe != "" {
		return fmt.Errorf("a pair across nodes has no placement probe, not %q", spec.Probe)
	}
	runtime.LockOSThread() // the timed loops read this thread's CPU time
	defer runtime.UnlockOSThread()
	r, err := newRank(spec, e, newCtl(to, from), me, nil)
	if err != nil {
		return err
	}
	if me == 0 {
		return lead(spec, r, placer{}, emitter(emit))
	}
	return follow(r, nil)
}

// emitter turns a function into lead's encoder.
type emitter func(Sample) error

func (f emitter) Encode(v any) error {
	s, ok := v.(Sample)
	if !ok {
		return fmt.Errorf("harness: lead encodes a %T, not a Sample", v)
	}
	return f(s)
}
