package collbench

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/coll"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

// EnvSpec carries a knemesis job's Spec to its ranks.
const EnvSpec = "LMTBENCH_COLL_SPEC"

// Spec is one measurement: Op at Size bytes (per rank; per pair for
// alltoall) on Procs ranks, Iters timed after Warmup untimed.
type Spec struct {
	Op     string
	Size   int
	Iters  int
	Warmup int
	CPUs   []int // one per rank, nil: unpinned
}

// Result is the slowest rank's time for the timed iterations.
type Result struct {
	Nanos int64
	Iters int
}

// Latency is the time of one operation.
func (r Result) Latency() time.Duration { return time.Duration(r.Nanos / int64(r.Iters)) }

// Worker is a rank of a knemesis job: the operation through package coll
// on the world communicator of knemesis.Join's endpoint (the automatic
// LMT choice), timed as the MPI side times it.
func Worker(p launch.Proc, stdout io.Writer) error {
	var s Spec
	if err := readSpec(&s); err != nil {
		return err
	}
	if s.CPUs != nil {
		if err := machine.PinProcess(s.CPUs[p.Rank%len(s.CPUs)]); err != nil {
			return err
		}
	}
	ep, err := knemesis.JoinProc(p, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	world := coll.World(ep.Endpoint)
	run, err := operation(world, s)
	if err != nil {
		return err
	}
	var t0 time.Time
	for i := range s.Warmup + s.Iters {
		if i == s.Warmup {
			if err := coll.Barrier(world); err != nil {
				return err
			}
			t0 = time.Now()
		}
		if err := run(); err != nil {
			return err
		}
	}
	mine := []int64{int64(time.Since(t0))}
	slowest := make([]int64, 1)
	if err := coll.Reduce(world, mine, slowest, coll.Max[int64](), 0); err != nil {
		return err
	}
	if p.Rank == 0 {
		return json.NewEncoder(stdout).Encode(Result{Nanos: slowest[0], Iters: s.Iters})
	}
	return nil
}

// operation returns one call of s's operation on world, with its buffers.
func operation(world *coll.Comm, s Spec) (func() error, error) {
	n := world.Size()
	count := max(s.Size/8, 1)
	switch s.Op {
	case Barrier:
		return func() error { return coll.Barrier(world) }, nil
	case Bcast:
		buf := make([]byte, s.Size)
		return func() error { return coll.Bcast(world, buf, 0) }, nil
	case Allreduce:
		a, b := make([]float64, count), make([]float64, count)
		return func() error { return coll.Allreduce(world, a, b, coll.Sum[float64]()) }, nil
	case Alltoall:
		a, b := make([]byte, s.Size*n), make([]byte, s.Size*n)
		return func() error { return coll.Alltoall(world, a, b) }, nil
	}
	return nil, fmt.Errorf("operation %q: want one of %v", s.Op, Ops)
}
