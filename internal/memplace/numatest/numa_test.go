package numatest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/knemtest"
	"github.com/knemesis/knemesis/internal/memplace"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/rma"
	"github.com/knemesis/knemesis/topology"
)

// arenaSize is each rank's region of the shared arena: 256 pages, so that
// a share short of every page shows.
const arenaSize = 1 << 20

// nodeCPUs returns one CPU of each NUMA node, in node order, or skips
// where the machine has fewer than two nodes (the QEMU guests, which must
// have two, fail instead).
func nodeCPUs(t *testing.T) []int {
	t.Helper()
	n, err := topology.HostNUMA()
	if err != nil {
		t.Fatalf("reading %s: %v", topology.SysfsNodeRoot, err)
	}
	var cpus []int
	for _, node := range n.Nodes {
		if len(node.CPUs) > 0 {
			cpus = append(cpus, node.CPUs[0])
		}
	}
	if len(cpus) < 2 {
		if knemtest.InGuest() {
			t.Fatalf("the guest has %d NUMA node(s) with CPUs, want 2: does ci/test-kernel.sh still pass -numa?", len(cpus))
		}
		t.Skipf("lacks numa-nodes: %d NUMA node(s) with CPUs here; make test-kernel runs this test in a two-node QEMU guest", len(cpus))
	}
	return cpus
}

// bindProcess binds every thread of this process to cpu, so that the
// rank's home node (memplace.Home) and the pages it first-touches are
// that CPU's node. A thread created later inherits its creator's mask.
func bindProcess(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("binding thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	return nil
}

// share checks that every page of mem sits on node.
func share(what string, mem []byte, node int) error {
	on, total, err := memplace.Share(mem, node)
	if err != nil {
		return fmt.Errorf("%s: move_pages: %w", what, err)
	}
	if on != total || total == 0 {
		where, _ := memplace.Where(mem)
		return fmt.Errorf("%s: %d of %d pages on node %d, want all (nodes: %s)", what, on, total, node, summary(where))
	}
	return nil
}

// summary counts pages per node, for a failure's message.
func summary(nodes []int) string {
	count := map[int]int{}
	for _, n := range nodes {
		count[n]++
	}
	var parts []string
	for n, c := range count {
		parts = append(parts, fmt.Sprintf("%d on %d", c, n))
	}
	return strings.Join(parts, ", ")
}

// TestOwnedPartsOnOwnersNode: two ranks bound to CPUs of different nodes
// join a job with an arena and allocate an RMA window. Rank 0 creates the
// segment, so every page of it starts on node 0; each rank's arena region
// and its part of the window must end up wholly on its own node, and say
// so in Placement.
func TestOwnedPartsOnOwnersNode(t *testing.T) {
	cpus := nodeCPUs(t)
	launchtest.Run(t, 2, func(p launch.Proc) error {
		if err := bindProcess(cpus[p.Rank]); err != nil {
			return err
		}
		node, why := memplace.Home()
		if node < 0 {
			return fmt.Errorf("rank %d bound to CPU %d has no home node: %s", p.Rank, cpus[p.Rank], why)
		}
		ep, err := nemesis.JoinProc(p, &nemesis.Options{ArenaSize: arenaSize})
		if err != nil {
			return err
		}
		defer ep.Close()
		if got, want := ep.Placement(), fmt.Sprintf("node %d", node); got != want {
			return fmt.Errorf("rank %d: arena placement %q, want %q", p.Rank, got, want)
		}
		buf, err := ep.Alloc(arenaSize)
		if err != nil {
			return err
		}
		// Written as a send buffer is: move_pages sees only pages this
		// process maps, and a page the creator's fallocate put on node 0
		// must show there unless placement moved it.
		for i := range buf {
			buf[i] = byte(i)
		}
		if err := share(fmt.Sprintf("rank %d's arena region", p.Rank), buf, node); err != nil {
			return err
		}
		w, err := rma.Allocate(ep, arenaSize, nil)
		if err != nil {
			return err
		}
		clear(w.Local())
		if got, want := w.Placement(), fmt.Sprintf("node %d", node); got != want {
			return fmt.Errorf("rank %d: window placement %q, want %q", p.Rank, got, want)
		}
		if err := share(fmt.Sprintf("rank %d's part of the window", p.Rank), w.Local(), node); err != nil {
			return err
		}
		if err := w.Fence(); err != nil {
			return err
		}
		return w.Free()
	})
}
