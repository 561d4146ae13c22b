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
	Sizes  []int // choicesOp: the sizes to report
	Iters  int
	Warmup int
	CPUs   []int // one per rank, nil: unpinned
}

// Result is the slowest rank's time for the timed iterations; for the
// IS-like kernel also the checksum of the keys generated, which the sort
// kept (both sides must report the same: they sorted the same keys).
type Result struct {
	Nanos    int64
	Iters    int
	Checksum uint64 `json:",omitempty"`
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
	if s.Op == choicesOp {
		// Every rank stays until rank 0 has read its tables.
		if p.Rank == 0 {
			lines, err := choices(ep, s.Sizes)
			if err != nil {
				return err
			}
			if err := writeChoices(stdout, lines); err != nil {
				return err
			}
		}
		return coll.Barrier(world)
	}
	run, verify, err := operation(world, s)
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
	res := Result{Nanos: slowest[0], Iters: s.Iters}
	if verify != nil {
		if res.Checksum, err = verify(); err != nil {
			return err
		}
	}
	if p.Rank == 0 {
		return json.NewEncoder(stdout).Encode(res)
	}
	return nil
}

// operation returns one call of s's operation on world, with its buffers,
// and for the IS-like kernel the check to run after the timed calls,
// which returns the checksum of the keys.
func operation(world *coll.Comm, s Spec) (run func() error, verify func() (uint64, error), err error) {
	n := world.Size()
	count := max(s.Size/8, 1)
	switch s.Op {
	case Barrier:
		return func() error { return coll.Barrier(world) }, nil, nil
	case Bcast:
		buf := make([]byte, s.Size)
		return func() error { return coll.Bcast(world, buf, 0) }, nil, nil
	case Allreduce:
		a, b := make([]float64, count), make([]float64, count)
		return func() error { return coll.Allreduce(world, a, b, coll.Sum[float64]()) }, nil, nil
	case Alltoall:
		a, b := make([]byte, s.Size*n), make([]byte, s.Size*n)
		return func() error { return coll.Alltoall(world, a, b) }, nil, nil
	case IS:
		st := newIS(world.Rank(), n, s.Size)
		run = func() error {
			st.bucket()
			if err := coll.Alltoall(world, st.scount, st.rcount); err != nil {
				return err
			}
			if err := st.received(); err != nil {
				return err
			}
			if err := coll.Alltoallv(world, st.send, st.sc, st.sd, st.recv, st.rc, st.rd); err != nil {
				return err
			}
			return st.sort()
		}
		return run, func() (uint64, error) { return verifyIS(world, st) }, nil
	}
	return nil, nil, fmt.Errorf("operation %q: want one of %v", s.Op, AllOps)
}

// verifyIS checks the sort on every rank, then the job's key counts and
// checksums before and after; every rank returns the same verdict, so
// that none waits on a rank that already gave up.
func verifyIS(world *coll.Comm, st *isState) (uint64, error) {
	after, local := st.verifyLocal()
	bad := int64(0)
	if local != nil {
		bad = 1
	}
	counts := []int64{int64(st.generated), int64(st.sortedKeys), bad}
	sums := []uint64{st.sumBefore, after}
	gc, gs := make([]int64, 3), make([]uint64, 2)
	if err := coll.Allreduce(world, counts, gc, coll.Sum[int64]()); err != nil {
		return 0, err
	}
	if err := coll.Allreduce(world, sums, gs, coll.Sum[uint64]()); err != nil {
		return 0, err
	}
	switch {
	case local != nil:
		return 0, local
	case gc[2] > 0:
		return 0, fmt.Errorf("is: %d ranks found their sorted keys out of order or out of range", gc[2])
	}
	return gs[0], isVerifyGlobal(gc[0], gc[1], gs[0], gs[1])
}
