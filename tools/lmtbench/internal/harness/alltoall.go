package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
)

// An alltoall job has Procs ranks. Rank 0 drives the others as in the
// two-rank harness: a command down each rank's pipe, replies (each rank's
// CPU time) up one shared pipe. In a Sample, CPUSeconds[0] is rank 0's CPU
// time and CPUSeconds[1] the sum over the other ranks.
type collective struct {
	spec       Spec
	m          engine.Multi
	me, n      int
	down       []*ctl // rank 0: one per other rank, index rank-1
	up         *ctl   // rank 0: read end; others: write end
	fromRoot   *ctl   // others: commands from rank 0
	send, recv [][]byte
}

func alltoallWorker(p launch.Proc, spec Spec, out io.Writer) error {
	maxSize := slices.Max(spec.Sizes)
	m, err := engine.OpenMulti(spec.Backend, engine.Peer{Proc: p, MaxSize: maxSize, CPUs: spec.CPUs})
	if err != nil {
		return err
	}
	defer m.Close()
	c := &collective{spec: spec, m: m, me: p.Rank, n: p.Size}
	for _, fd := range []int{fdToPeer, fdFromPeer, fdShared} {
		closeOnExec(fd)
	}
	if c.me == 0 {
		c.up = newCtl(nil, os.NewFile(fdFromPeer, "up"))
		c.down = append(c.down, newCtl(os.NewFile(fdToPeer, "down-1"), nil))
		for r := 2; r < c.n; r++ {
			fd := uintptr(fdShared + r - 1) // 6, 7, … for ranks 2, 3, …
			closeOnExec(int(fd))
			c.down = append(c.down, newCtl(os.NewFile(fd, fmt.Sprintf("down-%d", r)), nil))
		}
	} else {
		c.up = newCtl(os.NewFile(fdToPeer, "up"), nil)
		c.fromRoot = newCtl(nil, os.NewFile(fdFromPeer, "down"))
	}
	c.send, c.recv = make([][]byte, c.n), make([][]byte, c.n)
	for r := range c.n {
		if r == c.me {
			continue
		}
		c.send[r], c.recv[r] = make([]byte, maxSize), make([]byte, maxSize)
		for i := range c.send[r] {
			c.send[r][i], c.recv[r][i] = 1, 2 // fault the pages in now
		}
	}
	line, err := openLineProbe(spec, c.me)
	if err != nil {
		return err
	}
	defer line.close()
	if c.me == 0 {
		return lead(spec, c, placer{path: spec.Probe, line: line, tell: c.tell}, json.NewEncoder(out))
	}
	return follow(c, line)
}

func (c *collective) tell(cmd, size, iters int64) error {
	for _, d := range c.down {
		if err := d.put(cmd, size, iters); err != nil {
			return err
		}
	}
	return nil
}

func (c *collective) command() (cmd, size, iters int64, err error) { return c.fromRoot.get() }
func (c *collective) reply(cpu time.Duration) error                { return c.up.put(int64(cpu), 0, 0) }

func (c *collective) leadSample(size, iters int) (Sample, error) {
	if err := c.tell(cmdSample, int64(size), int64(iters)); err != nil {
		return Sample{}, err
	}
	start := time.Now()
	cpu, err := c.loop(size, iters)
	if err != nil {
		return Sample{}, err
	}
	var others time.Duration
	for range c.n - 1 {
		v, _, _, err := c.up.get()
		if err != nil {
			return Sample{}, err
		}
		others += time.Duration(v)
	}
	return Sample{
		Size: size, Iterations: iters, Messages: iters * c.n * (c.n - 1),
		Seconds:    time.Since(start).Seconds(),
		CPUSeconds: [2]float64{cpu.Seconds(), others.Seconds()},
	}, nil
}

func (c *collective) slices(size int) (send, recv [][]byte) {
	send, recv = make([][]byte, c.n), make([][]byte, c.n)
	for r := range c.n {
		if r != c.me {
			send[r], recv[r] = c.send[r][:size], c.recv[r][:size]
		}
	}
	return send, recv
}

func (c *collective) loop(size, iters int) (time.Duration, error) {
	send, recv := c.slices(size)
	start := threadCPU()
	for range iters {
		if err := c.m.Alltoall(send, recv); err != nil {
			return 0, err
		}
	}
	return threadCPU() - start, nil
}

// verify runs one Alltoall of patterned messages, distinct per ordered
// pair of ranks, and checks every byte received.
func (c *collective) verify(size int) error {
	send, recv := c.slices(size)
	for r := range c.n {
		if r != c.me {
			fill(send[r], seed(c.me*c.n+r, size))
			clear(recv[r])
		}
	}
	if err := c.m.Alltoall(send, recv); err != nil {
		return err
	}
	for r := range c.n {
		if r == c.me {
			continue
		}
		if err := check(recv[r], seed(r*c.n+c.me, size), c.spec.Backend, fmt.Sprintf("alltoall from rank %d", r)); err != nil {
			return err
		}
	}
	return nil
}
