//go:build ofi && pmix

// Command netbench measures the two paths of a job that spans nodes, when
// started by mpirun or srun (ranks found through PMIx, see package
// ofinet): rank 0 ping-pongs with the first rank on another node (net) and
// the first rank on its own node (shm), the latter twice: in this job,
// whose network module is initialised, and in a job of the node's ranks
// only, without one. Each line gives the path and the provider, and the
// figures the way fi_pingpong (libfabric-bin) prints them: microseconds
// per one-way transfer and MB/s (10^6 bytes), from ping-pong round trips.
//
//	mpirun --oversubscribe -np 3 -x KNEMESIS_NODE_MAP=0,0,1 netbench
//
// netmod/ofinet/bench.sh runs it beside fi_pingpong and an Open MPI tcp
// BTL ping-pong over the same addresses and prints the ratios. For the
// usual sizes and shapes between any two ranks, with --json and --csv,
// use lmtbench under the launcher (tools/lmtbench, built with the same
// tags); netbench keeps what lmtbench does not: the same-run comparison
// with a job of the node's ranks that has no module.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/netmod/ofi"
	"github.com/knemesis/knemesis/netmod/ofinet"
	"github.com/knemesis/knemesis/netmod/pmix"
)

func main() {
	prov := flag.String("provider", ofinet.DefaultProvider, "libfabric provider (one of "+ofinet.ProviderNames()+")")
	node := flag.String("node", "127.0.0.1", "address to bind the network module to")
	iters := flag.Int("iters", 10000, "round trips for 8 B (fewer for larger messages)")
	flag.Parse()
	if err := run(*prov, *node, *iters); err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(1)
	}
}

func run(prov, node string, iters int) error {
	ep, c, err := ofinet.Join(ofinet.Config{Config: ofi.Config{Provider: prov, Node: node}}, nil)
	if err != nil {
		return err
	}
	defer c.Finalize()
	remote, local, err := partners(ep, c)
	if err == nil {
		err = attachAuto(ep)
	}
	if err != nil {
		ep.Close()
		return err
	}
	cases := []struct {
		peer, size, iters int
		label             string
	}{
		{remote, 8, iters, "remote 8B"},
		{remote, 4 << 20, max(iters/200, 20), "remote 4MiB"},
		{local, 8, iters * 100, "local 8B fastbox, module initialised"},
		{local, 1 << 20, max(iters/20, 50), "local 1MiB auto, module initialised"},
	}
	for _, k := range cases {
		if err := measure(ep, k.peer, k.size, k.iters, k.label); err != nil {
			ep.Close()
			return err
		}
	}
	ep.Close()
	return withoutModule(c, iters)
}

// partners finds rank 0's partner on another node and on its own; every
// other rank's partner is rank 0 when it is one of them, else -1.
func partners(ep *nemesis.Endpoint, c *pmix.Client) (remote, local int, err error) {
	remote, local = -1, -1
	for r := 1; r < ep.Size(); r++ {
		n, err := c.NodeOf(r)
		if err != nil {
			return 0, 0, err
		}
		n0, _ := c.NodeOf(0)
		if n != n0 && remote < 0 {
			remote = r
		}
		if n == n0 && local < 0 {
			local = r
		}
	}
	if remote < 0 || local < 0 {
		return 0, 0, fmt.Errorf("rank 0 needs a rank on another node and one on its own: start 3 ranks with %s=0,0,1", pmix.EnvNodeMap)
	}
	return remote, local, nil
}

// measure ping-pongs size bytes iters times between rank 0 and peer; other
// ranks sit it out (ofinet.Idle until rank 0's done).
func measure(ep *nemesis.Endpoint, peer, size, iters int, label string) error {
	buf := make([]byte, size)
	runtime.GC() // not during the timing: the cases before leave garbage of up to 4 MiB messages
	const tag, done = 1, 2
	switch ep.Rank() {
	case 0:
		for i := range warmup(iters) {
			if err := pingPong(ep, peer, buf, i == 0); err != nil {
				return err
			}
		}
		t0 := time.Now()
		for range iters {
			if err := pingPong(ep, peer, buf, false); err != nil {
				return err
			}
		}
		el := time.Since(t0)
		us := float64(el.Microseconds()) / float64(2*iters)
		fmt.Printf("%-40s path=%-22s bytes=%-8d iters=%-6d usec/xfer=%.3f MB/sec=%.2f\n", label, ep.Path(peer), size, iters, us, float64(size)/us)
		for r := 1; r < ep.Size(); r++ {
			if err := ep.Send(r, done, nil); err != nil {
				return err
			}
		}
	case peer:
		for range iters + warmup(iters) {
			if _, err := ep.Recv(0, tag, buf); err != nil {
				return err
			}
			if err := ep.Send(0, tag, buf); err != nil {
				return err
			}
		}
		_, err := ep.Recv(0, done, nil)
		return err
	default:
		return ofinet.Idle(ep, 0, done)
	}
	return nil
}

// warmup is how many untimed round trips come first: connections,
// fastboxes, and the learner of auto, which tries each backend a few
// times per size before it settles: with a tenth of a short case as its
// warm-up, the 1 MiB figures timed the exploration too (docs/performance.md,
// fifth session).
func warmup(iters int) int { return max(iters/10+1, 300) }

func pingPong(ep *nemesis.Endpoint, peer int, buf []byte, check bool) error {
	if err := ep.Send(peer, 1, buf); err != nil {
		return err
	}
	st, err := ep.Recv(peer, 1, buf)
	if err == nil && check && st.Len != len(buf) {
		err = fmt.Errorf("ping-pong with rank %d: %d bytes back of %d", peer, st.Len, len(buf))
	}
	return err
}

// withoutModule repeats the local figures in a job of this node's ranks
// only, shared memory alone.
func withoutModule(c *pmix.Client, iters int) error {
	me, _ := c.NodeOf(c.Rank())
	var mates []int
	for r := range c.Size() {
		if n, _ := c.NodeOf(r); n == me {
			mates = append(mates, r)
		}
	}
	if me != 0 {
		return nil
	}
	idx := 0
	for i, r := range mates {
		if r == c.Rank() {
			idx = i
		}
	}
	ep, err := nemesis.Join(fmt.Sprintf("%s.shm%d", ofinet.JobName(c.Namespace()), me), idx, len(mates), nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	if err := attachAuto(ep); err != nil {
		return err
	}
	for _, k := range []struct {
		size, iters int
		label       string
	}{{8, iters * 100, "local 8B fastbox, no module"}, {1 << 20, max(iters/20, 50), "local 1MiB auto, no module"}} {
		if err := measure(ep, 1, k.size, k.iters, k.label); err != nil {
			return err
		}
	}
	return nil
}

// attachAuto gives the endpoint the LMT that auto chooses per local peer;
// a remote peer's long messages go by its net-read backend.
func attachAuto(ep *nemesis.Endpoint) error {
	_, err := auto.Attach(ep, auto.Options{})
	return err
}
