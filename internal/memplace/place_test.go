package memplace

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/topology"
)

// sharedMap maps a fresh memfd of n pages, as the shared objects are.
func sharedMap(t *testing.T, n int) []byte {
	fd, err := unix.MemfdCreate("knemesis-memplace-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	size := n * os.Getpagesize()
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return mem
}

// hostNodes counts the node directories of sysfs, read apart from topology.
func hostNodes(t *testing.T) int {
	dirs, err := os.ReadDir(topology.SysfsNodeRoot)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range dirs {
		if strings.HasPrefix(d.Name(), "node") {
			n++
		}
	}
	return n
}

// TestPlaceOnNode0: every page of a shared mapping bound to node 0 is
// there afterwards, as move_pages(2) reports it: 64 of 64.
func TestPlaceOnNode0(t *testing.T) {
	mem := sharedMap(t, 64)
	if r := PlaceOn(mem, 0); r.Node != 0 || r.Note != "" {
		t.Fatalf("PlaceOn: %v", r)
	}
	if on, total, err := Share(mem, 0); on != 64 || total != 64 || err != nil {
		t.Fatalf("%d of %d pages on node 0 (%v), want 64 of 64", on, total, err)
	}
}

// TestWhereUntouched: pages never touched are not present: -ENOENT each.
func TestWhereUntouched(t *testing.T) {
	nodes, err := Where(sharedMap(t, 4))
	if err != nil || fmt.Sprint(nodes) != fmt.Sprint([]int{-2, -2, -2, -2}) {
		t.Fatalf("got %v, %v; want four -ENOENT", nodes, err)
	}
}

// TestPlaceRefused: a node the machine lacks is refused by mbind, and the
// result names what to change instead of failing.
func TestPlaceRefused(t *testing.T) {
	n := hostNodes(t)
	r := PlaceOn(sharedMap(t, 2), n)
	want := fmt.Sprintf("mbind to node %d refused (invalid argument): allow the node in this job's cpuset (cpuset.mems) or run with numactl --membind", n)
	if r.Node != -1 || r.Note != want {
		t.Fatalf("got %v, want %q", r, want)
	}
}

// TestHomeOf: a two-node machine gives a rank bound to one node that node,
// a rank across both none, and a one-node machine none.
func TestHomeOf(t *testing.T) {
	two, err := topology.ReadNUMA(fstest.MapFS{
		"node0/cpulist": {Data: []byte("0-1\n")}, "node0/distance": {Data: []byte("10 20\n")},
		"node1/cpulist": {Data: []byte("2-3\n")}, "node1/distance": {Data: []byte("20 10\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	one, _ := topology.ReadNUMA(fstest.MapFS{"node0/cpulist": {Data: []byte("0-3\n")}, "node0/distance": {Data: []byte("10\n")}})
	mask := func(s topology.CPUSet, err error) func() (topology.CPUSet, error) {
		return func() (topology.CPUSet, error) { return s, err }
	}
	for _, c := range []struct {
		name string
		n    *topology.NUMA
		aff  func() (topology.CPUSet, error)
		node int
		why  string
	}{
		{"bound to node 1", two, mask(topology.CPUSet{2, 3}, nil), 1, ""},
		{"across nodes", two, mask(topology.CPUSet{1, 2}, nil), -1, "CPUs 1-2 span nodes: bind each rank to one node's CPUs (taskset, numactl --cpunodebind) to place its objects"},
		{"mask unknown", two, mask(nil, errors.New("no such process")), -1, "affinity unknown: no such process"},
		{"one node", one, mask(topology.CPUSet{0}, nil), -1, "1 node: nothing to place"},
	} {
		if node, why := HomeOf(c.n, c.aff); node != c.node || why != c.why {
			t.Errorf("%s: got %d, %q; want %d, %q", c.name, node, why, c.node, c.why)
		}
	}
}

// TestHostPlace: on a one-node host Place does nothing and says so; on
// several nodes it places on the home node.
func TestHostPlace(t *testing.T) {
	r := Place(sharedMap(t, 2))
	if hostNodes(t) == 1 {
		if r.Node != -1 || r.Note != "1 node: nothing to place" {
			t.Fatalf("got %v", r)
		}
		return
	}
	if node, why := Home(); r.Node != node || node < 0 && r.Note != why {
		t.Fatalf("got %v, home %d (%s)", r, node, why)
	}
}
