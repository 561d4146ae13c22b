package topology

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"
)

// twoNodes is a two-socket machine: CPUs 0-1,4 on node 0, 2-3 on node 1.
var twoNodes = fstest.MapFS{
	"node0/cpulist":  {Data: []byte("0-1,4\n")},
	"node0/distance": {Data: []byte("10 21\n")},
	"node1/cpulist":  {Data: []byte("2-3\n")},
	"node1/distance": {Data: []byte("21 10\n")},
	"online":         {Data: []byte("0-1\n")},
}

// TestReadNUMA: nodes, the node of each CPU and of a rank's mask, and the
// distance between two CPUs.
func TestReadNUMA(t *testing.T) {
	n, err := ReadNUMA(twoNodes)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.String(); got != "2 nodes; node0 cpus 0-1,4 distances [10 21]; node1 cpus 2-3 distances [21 10]" {
		t.Fatalf("got %q", got)
	}
	for _, c := range []struct{ a, b, dist int }{{0, 1, 10}, {0, 2, 21}, {3, 4, 21}, {2, 3, 10}, {0, 9, -1}} {
		if got := n.CPUDistance(c.a, c.b); got != c.dist {
			t.Errorf("CPUDistance(%d, %d) = %d, want %d", c.a, c.b, got, c.dist)
		}
	}
	if node, ok := n.NodeOfSet(CPUSet{2, 3}); node != 1 || !ok {
		t.Errorf("NodeOfSet(2-3) = %d, %v", node, ok)
	}
	if node, ok := n.NodeOfSet(CPUSet{1, 2}); node != -1 || ok {
		t.Errorf("NodeOfSet(1-2), across nodes = %d, %v", node, ok)
	}
	if n.NodeOf(4) != 0 || n.NodeOf(7) != -1 {
		t.Errorf("NodeOf(4) = %d, NodeOf(7) = %d", n.NodeOf(4), n.NodeOf(7))
	}
}

// TestReadNUMARefusesShortRow: a distance row that does not match the
// node count is an error naming the file.
func TestReadNUMARefusesShortRow(t *testing.T) {
	bad := fstest.MapFS{}
	for k, v := range twoNodes {
		bad[k] = v
	}
	bad["node1/distance"] = &fstest.MapFile{Data: []byte("21\n")}
	if _, err := ReadNUMA(bad); err == nil || err.Error() != "numa: node1/distance has 1 entries for 2 nodes" {
		t.Fatalf("got %v", err)
	}
}

// TestHostNUMA: this machine's layout matches its sysfs, read here apart:
// the node count and every online CPU on exactly one node.
func TestHostNUMA(t *testing.T) {
	n, err := HostNUMA()
	if err != nil {
		t.Fatal(err)
	}
	dirs, _ := os.ReadDir(SysfsNodeRoot)
	count := 0
	for _, d := range dirs {
		if strings.HasPrefix(d.Name(), "node") {
			count++
		}
	}
	if len(n.Nodes) != count {
		t.Fatalf("%d nodes, sysfs has %d", len(n.Nodes), count)
	}
	b, err := os.ReadFile(SysfsCPURoot + "/online")
	if err != nil {
		t.Fatal(err)
	}
	online, _ := ParseCPUList(string(b))
	for _, c := range online {
		if n.NodeOf(c) < 0 || n.CPUDistance(c, c) != 10 {
			t.Errorf("CPU %d: node %d, distance to itself %d", c, n.NodeOf(c), n.CPUDistance(c, c))
		}
	}
}
