package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// SysfsNodeRoot is where Linux describes NUMA nodes; [ReadNUMA] takes an
// fs.FS rooted there.
const SysfsNodeRoot = "/sys/devices/system/node"

// NUMA is the machine's memory nodes as sysfs lists them: which CPUs each
// has and the distance between every two (the ACPI SLIT, 10 for a node to
// itself). A kernel without NUMA has no node directory: one node then
// holds every CPU.
type NUMA struct {
	Nodes []Node
	// Distance[i][j] is the distance from Nodes[i] to Nodes[j].
	Distance [][]int
	nodeOf   map[int]int // CPU to index in Nodes
}

// Node is one memory node.
type Node struct {
	ID   int
	CPUs CPUSet
}

// ReadNUMA reads nodeN/cpulist and nodeN/distance from fsys, laid out like
// /sys/devices/system/node.
func ReadNUMA(fsys fs.FS) (*NUMA, error) {
	dirs, err := fs.Glob(fsys, "node[0-9]*")
	if err != nil || len(dirs) == 0 {
		return nil, fmt.Errorf("numa: no node directory in %s: %w", SysfsNodeRoot, errors.Join(err, fs.ErrNotExist))
	}
	n := &NUMA{nodeOf: map[int]int{}}
	for _, d := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(d, "node"))
		if err != nil {
			continue
		}
		b, err := fs.ReadFile(fsys, path.Join(d, "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("numa: %w", err)
		}
		cpus, err := ParseCPUList(string(b))
		if err != nil {
			return nil, fmt.Errorf("numa: %s/cpulist: %w", d, err)
		}
		n.Nodes = append(n.Nodes, Node{ID: id, CPUs: cpus})
	}
	slices.SortFunc(n.Nodes, func(a, b Node) int { return a.ID - b.ID })
	for i, nd := range n.Nodes {
		for _, c := range nd.CPUs {
			n.nodeOf[c] = i
		}
		row, err := readDistances(fsys, nd.ID, len(n.Nodes))
		if err != nil {
			return nil, err
		}
		n.Distance = append(n.Distance, row)
	}
	return n, nil
}

// readDistances reads one node's row of the distance matrix; the kernel
// prints one entry per online node, in node order.
func readDistances(fsys fs.FS, id, nodes int) ([]int, error) {
	name := fmt.Sprintf("node%d/distance", id)
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("numa: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != nodes {
		return nil, fmt.Errorf("numa: %s has %d entries for %d nodes", name, len(f), nodes)
	}
	row := make([]int, nodes)
	for i, s := range f {
		if row[i], err = strconv.Atoi(s); err != nil {
			return nil, fmt.Errorf("numa: %s: %q is not a distance", name, s)
		}
	}
	return row, nil
}

// HostNUMA reads this machine's nodes.
func HostNUMA() (*NUMA, error) { return ReadNUMA(os.DirFS(SysfsNodeRoot)) }

// NodeOf returns the node ID of cpu, or -1 for a CPU no node lists.
func (n *NUMA) NodeOf(cpu int) int {
	if i, ok := n.nodeOf[cpu]; ok {
		return n.Nodes[i].ID
	}
	return -1
}

// NodeOfSet returns the one node that holds every CPU of set (a rank's
// affinity); false when the set spans nodes or names an unknown CPU, so
// that the rank has no single home node.
func (n *NUMA) NodeOfSet(set CPUSet) (int, bool) {
	node := -1
	for _, c := range set {
		i, ok := n.nodeOf[c]
		if !ok || node >= 0 && i != node {
			return -1, false
		}
		node = i
	}
	if node < 0 {
		return -1, false
	}
	return n.Nodes[node].ID, true
}

// CPUDistance is the distance between the nodes of two CPUs (two ranks'
// CPUs): 10 on one node; -1 when either CPU is on no node.
func (n *NUMA) CPUDistance(a, b int) int {
	i, okA := n.nodeOf[a]
	j, okB := n.nodeOf[b]
	if !okA || !okB {
		return -1
	}
	return n.Distance[i][j]
}

// String is the layout as `lmtbench info` prints it: each node's CPUs and
// its row of distances.
func (n *NUMA) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d node", len(n.Nodes))
	if len(n.Nodes) != 1 {
		b.WriteByte('s')
	}
	for i, nd := range n.Nodes {
		fmt.Fprintf(&b, "; node%d cpus %s distances %v", nd.ID, nd.CPUs, n.Distance[i])
	}
	return b.String()
}
