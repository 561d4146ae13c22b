// Package typedbench is lmtbench's vector and indexed commands: the
// ping-pong of Aumage, Brunet, Furmento and Namyst, "NewMadeleine: a Fast
// Communication Scheduling Engine for High Performance Networks" (CAC
// 2007), §5.3, whose message is described by a derived datatype, between
// two Nemesis endpoints with the LMT attached. Two variants run in the
// same job, alternating round by round:
//
//   - typed: Endpoint.SendType and RecvType, the description handed to the
//     LMT (small blocks staged, large ones moved in place by CMA);
//   - pack: what MPICH does, the blocks packed into one contiguous buffer
//     (datatype.Type.Pack), that buffer sent with Send, received with
//     Recv into another and unpacked into the blocks.
//
// Both ranks keep their data in the type's blocks: rank 1 echoes what it
// received from its own blocks, and rank 0 checks, after every sample,
// that its receive blocks hold what it sent.
package typedbench

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/selfjob"
)

// EnvSpec carries the JSON Spec to the ranks of a job.
const EnvSpec = "LMTBENCH_TYPED"

// The variants, in the order of a round's first sample, named as the
// report's rows.
const (
	Typed = report.TypedRow
	Pack  = report.PackRow
)

// Variants are both variants, as the report names their rows.
var Variants = []string{Typed, Pack}

// Spec is one job: Rounds samples of each variant of Shape, Iters timed
// round trips each after Warmup untimed ones (before the first round).
type Spec struct {
	Shape  Shape
	Rounds int
	Iters  int
	Warmup int
	Prefer []string // the LMT's backend preference, both variants
	CPUs   []int    // CPU of each rank, nil: unpinned
}

// Sample is one line rank 0 prints: a variant's Iters round trips in
// Nanos, and the CPU seconds each rank spent meanwhile.
type Sample struct {
	Round   int
	Variant string
	Nanos   int64
	Iters   int
	CPU     [2]float64
}

const (
	tagMsg = 1
	tagCPU = 2 // rank 1's CPU time of a sample
	tagBye = 3
)

// Worker is the body of a rank of a job; rank 0 writes one Sample per
// line to out.
func Worker(p launch.Proc, out io.Writer) error {
	var s Spec
	if err := selfjob.ReadSpec(EnvSpec, &s); err != nil {
		return err
	}
	if p.Size != 2 || s.Rounds < 1 || s.Iters < 1 {
		return fmt.Errorf("typedbench: job of %d ranks, %d rounds of %d iterations", p.Size, s.Rounds, s.Iters)
	}
	typ, err := s.Shape.Type()
	if err != nil {
		return err
	}
	ep, err := selfjob.Join(p, s.CPUs)
	if err != nil {
		return err
	}
	defer ep.Close()
	l, err := attach.Attach(ep, attach.Options{Prefer: s.Prefer})
	if err != nil {
		return err
	}
	defer l.Close()
	x := newExchange(ep, p.Rank, typ)
	enc := json.NewEncoder(out)
	for round := range s.Rounds {
		for i := range Variants {
			v := Variants[(i+round)%len(Variants)] // each goes first in turn
			smp, err := x.sample(v, s, round)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round, v, err)
			}
			if p.Rank == 0 {
				if err := enc.Encode(smp); err != nil {
					return err
				}
			}
		}
	}
	// Neither rank leaves while the other may still send to it.
	if err := ep.Send(1-p.Rank, tagBye, nil); err != nil {
		return err
	}
	_, err = ep.Recv(1-p.Rank, tagBye, nil)
	return err
}

// exchange is one rank's side: its blocks and pack buffer.
type exchange struct {
	ep     *nemesis.Endpoint
	rank   int
	typ    *datatype.Type
	sbase  []byte // rank 0: the blocks it sends
	rbase  []byte // the blocks it receives into (rank 1 echoes from them)
	packed []byte // pack: the contiguous message
}

func newExchange(ep *nemesis.Endpoint, rank int, typ *datatype.Type) *exchange {
	x := &exchange{ep: ep, rank: rank, typ: typ, rbase: make([]byte, typ.Extent()), packed: make([]byte, typ.Size())}
	if rank == 0 {
		x.sbase = make([]byte, typ.Extent())
		for i := range x.sbase {
			x.sbase[i] = byte(i*131 + 7)
		}
	}
	return x
}

// sample runs v's warm-up (first round only) and timed round trips, has
// rank 0 check what came back, and gathers both ranks' CPU time.
func (x *exchange) sample(v string, s Spec, round int) (Sample, error) {
	one := x.roundTripTyped
	if v == Pack {
		one = x.roundTripPacked
	}
	if round == 0 {
		for range s.Warmup {
			if err := one(); err != nil {
				return Sample{}, err
			}
		}
	}
	if x.rank == 0 {
		clear(x.rbase)
	}
	cpu0 := cpuSeconds()
	t0 := time.Now()
	for range s.Iters {
		if err := one(); err != nil {
			return Sample{}, err
		}
	}
	d := time.Since(t0)
	cpu := cpuSeconds() - cpu0
	var cbuf [8]byte
	if x.rank == 1 {
		binary.LittleEndian.PutUint64(cbuf[:], math.Float64bits(cpu))
		return Sample{}, x.ep.Send(0, tagCPU, cbuf[:])
	}
	if _, err := x.ep.Recv(1, tagCPU, cbuf[:]); err != nil {
		return Sample{}, err
	}
	if err := x.check(); err != nil {
		return Sample{}, err
	}
	return Sample{Round: round, Variant: v, Nanos: d.Nanoseconds(), Iters: s.Iters, CPU: [2]float64{cpu, math.Float64frombits(binary.LittleEndian.Uint64(cbuf[:]))}}, nil
}

// roundTripTyped: rank 0 sends its blocks and receives the echo into its
// receive blocks; rank 1 receives into its blocks and sends them back.
func (x *exchange) roundTripTyped() error {
	if x.rank == 0 {
		if err := x.ep.SendType(1, tagMsg, x.sbase, x.typ); err != nil {
			return err
		}
		_, err := x.ep.RecvType(1, tagMsg, x.rbase, x.typ)
		return err
	}
	if _, err := x.ep.RecvType(0, tagMsg, x.rbase, x.typ); err != nil {
		return err
	}
	return x.ep.SendType(0, tagMsg, x.rbase, x.typ)
}

// roundTripPacked is roundTripTyped as MPICH does it: pack, send the
// contiguous buffer, receive one, unpack.
func (x *exchange) roundTripPacked() error {
	src, peer := x.rbase, 0
	if x.rank == 0 {
		src, peer = x.sbase, 1
	} else if err := x.recvPacked(0); err != nil {
		return err
	}
	if _, err := x.typ.Pack(x.packed, src); err != nil {
		return err
	}
	if err := x.ep.Send(peer, tagMsg, x.packed); err != nil {
		return err
	}
	if x.rank == 0 {
		return x.recvPacked(1)
	}
	return nil
}

func (x *exchange) recvPacked(src int) error {
	if _, err := x.ep.Recv(src, tagMsg, x.packed); err != nil {
		return err
	}
	_, err := x.typ.Unpack(x.rbase, x.packed)
	return err
}

// check compares rank 0's receive blocks with its send blocks, block by
// block.
func (x *exchange) check() error {
	c := x.typ.Cursor()
	for {
		off, n := c.Next(1 << 30)
		if n == 0 {
			return nil
		}
		for i := off; i < off+n; i++ {
			if x.rbase[i] != x.sbase[i] {
				return fmt.Errorf("byte %d of the blocks came back %#x, sent %#x", i, x.rbase[i], x.sbase[i])
			}
		}
	}
}

// cpuSeconds is this process's user and system time.
func cpuSeconds() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
