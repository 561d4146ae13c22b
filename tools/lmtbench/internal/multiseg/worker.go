// Package multiseg is lmtbench's multiseg command: the ping-pong of
// Aumage, Brunet, Furmento and Namyst, "NewMadeleine: a Fast Communication
// Scheduling Engine for High Performance Networks" (CAC 2007), §5.2,
// whose message is several separately tagged segments, each sent with its
// own Isend and received with its own Irecv. It runs the same exchange
// over Nemesis endpoints with the straightforward strategy, with the
// aggregate strategy (the optimization window packs what waits behind a
// busy fastbox), with the aggregate strategy inside an explicit batch, and
// over Open MPI (the same Isends and Irecvs, built with mpicc.openmpi),
// interleaved round by round, and prints each one's median with the
// ratios. A single segment of 8 B is the plain ping-pong: there the
// window must cost nothing.
package multiseg

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/selfjob"
)

// EnvSpec carries the JSON Spec to the ranks of a multiseg job.
const EnvSpec = "LMTBENCH_MULTISEG"

// Variants of the Nemesis side.
const (
	Straightforward = "straightforward"
	Aggregate       = "aggregate"
	Batch           = "aggregate+batch"
)

// Spec is one job: Segs segments of Size bytes each way, Iters timed round
// trips after Warmup untimed ones.
type Spec struct {
	Variant string
	Segs    int
	Size    int
	Iters   int
	Warmup  int
	CPUs    []int // CPU of each rank, nil: unpinned
}

// Result is what rank 0 prints: the time of Iters round trips.
type Result struct {
	Nanos int64
	Iters int
}

// OneWay is half a round trip.
func (r Result) OneWay() time.Duration {
	return time.Duration(r.Nanos / int64(2*r.Iters))
}

// Worker is the body of a rank of a multiseg job; rank 0 writes its Result
// as one JSON line to out.
func Worker(p launch.Proc, out io.Writer) error {
	var s Spec
	if err := selfjob.ReadSpec(EnvSpec, &s); err != nil {
		return err
	}
	if p.Size != 2 || s.Segs < 1 || s.Size < 0 || s.Iters < 1 {
		return fmt.Errorf("multiseg: job of %d ranks, %d segments of %d bytes, %d iterations", p.Size, s.Segs, s.Size, s.Iters)
	}
	ep, err := selfjob.Join(p, s.CPUs)
	if err != nil {
		return err
	}
	defer ep.Close()
	if s.Variant != Straightforward {
		if err := ep.SetStrategy(nemesis.Aggregate); err != nil {
			return err
		}
	}
	x := newExchange(ep, 1-p.Rank, s)
	for range s.Warmup {
		if err := x.round(p.Rank == 0); err != nil {
			return err
		}
	}
	t0 := time.Now()
	for range s.Iters {
		if err := x.round(p.Rank == 0); err != nil {
			return err
		}
	}
	d := time.Since(t0)
	if err := x.check(); err != nil {
		return err
	}
	if p.Rank == 0 {
		return json.NewEncoder(out).Encode(Result{Nanos: d.Nanoseconds(), Iters: s.Iters})
	}
	return nil
}

// exchange is one rank's side: its segments, their requests.
type exchange struct {
	ep         *nemesis.Endpoint
	peer       int
	batch      bool
	send, recv [][]byte
	sreq, rreq []nemesis.Request
}

func newExchange(ep *nemesis.Endpoint, peer int, s Spec) *exchange {
	x := &exchange{ep: ep, peer: peer, batch: s.Variant == Batch}
	for i := range s.Segs {
		seg := make([]byte, s.Size)
		for j := range seg {
			seg[j] = byte(i*131 + j)
		}
		x.send = append(x.send, seg)
		x.recv = append(x.recv, make([]byte, s.Size))
	}
	x.sreq, x.rreq = make([]nemesis.Request, s.Segs), make([]nemesis.Request, s.Segs)
	return x
}

// round is one round trip: the leader sends then receives, the other
// receives then sends; receives are posted before the sends either way.
func (x *exchange) round(leader bool) error {
	for i := range x.recv {
		if err := x.ep.Irecv(&x.rreq[i], x.peer, i, x.recv[i]); err != nil {
			return err
		}
	}
	if !leader {
		if err := x.waitAll(x.rreq); err != nil {
			return err
		}
	}
	if x.batch {
		x.ep.Batch()
	}
	for i := range x.send {
		if err := x.ep.Isend(&x.sreq[i], x.peer, i, x.send[i]); err != nil {
			return err
		}
	}
	if x.batch {
		if err := x.ep.Flush(); err != nil {
			return err
		}
	}
	if err := x.waitAll(x.sreq); err != nil {
		return err
	}
	return x.waitAll(x.rreq)
}

func (x *exchange) waitAll(reqs []nemesis.Request) error {
	for i := range reqs {
		if err := x.ep.Wait(&reqs[i]); err != nil {
			return err
		}
	}
	return nil
}

// check compares the last segments received with what the peer sends.
func (x *exchange) check() error {
	for i, seg := range x.recv {
		for j, b := range seg {
			if b != byte(i*131+j) {
				return fmt.Errorf("multiseg: segment %d byte %d is %#x, want %#x", i, j, b, byte(i*131+j))
			}
		}
	}
	return nil
}
