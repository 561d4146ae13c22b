package memplace

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/topology"
)

// From linux/mempolicy.h, which golang.org/x/sys/unix does not carry.
const (
	mpolPreferred = 1
	mpolMFMove    = 1 << 1
	mpolMFMoveAll = 1 << 2
)

// maxNodes bounds the node mask: 1024 nodes, as the kernel's default
// CONFIG_NODES_SHIFT allows at most.
const maxNodes = 1024

// Result says what Place did.
type Result struct {
	Node int // the node bound to; -1 when nothing was placed
	Note string
}

func (r Result) String() string {
	if r.Node < 0 {
		return r.Note
	}
	if r.Note != "" {
		return fmt.Sprintf("node %d (%s)", r.Node, r.Note)
	}
	return fmt.Sprintf("node %d", r.Node)
}

var home = sync.OnceValues(func() (int, string) {
	n, err := topology.HostNUMA()
	if err != nil {
		return -1, "no NUMA layout in sysfs: " + err.Error()
	}
	return HomeOf(n, func() (topology.CPUSet, error) { return topology.Affinity(0) })
})

// Home returns this process's node, or -1 and why there is none.
func Home() (int, string) { return home() }

// HomeOf is Home for a given layout and affinity reader (tests inject both).
func HomeOf(n *topology.NUMA, affinity func() (topology.CPUSet, error)) (int, string) {
	if len(n.Nodes) == 1 {
		return -1, "1 node: nothing to place"
	}
	mask, err := affinity()
	if err != nil {
		return -1, "affinity unknown: " + err.Error()
	}
	node, ok := n.NodeOfSet(mask)
	if !ok {
		return -1, fmt.Sprintf("CPUs %s span nodes: bind each rank to one node's CPUs (taskset, numactl --cpunodebind) to place its objects", mask)
	}
	return node, ""
}

// Place binds mem's whole pages to this process's home node.
func Place(mem []byte) Result {
	node, why := Home()
	if node < 0 {
		return Result{Node: -1, Note: why}
	}
	return PlaceOn(mem, node)
}

// PlaceOn binds mem's whole pages to node and moves those already there.
func PlaceOn(mem []byte, node int) Result {
	mem = wholePages(mem)
	if len(mem) == 0 || node < 0 || node >= maxNodes {
		return Result{Node: -1, Note: "nothing to place"}
	}
	var mask [maxNodes / 64]uint64
	mask[node/64] = 1 << (node % 64)
	// The first bind sets the file's policy, so that the pages populated
	// next are allocated on node; populating maps the pages allocated
	// before (by fallocate or a peer), which the second bind then moves.
	if err := bind(mem, mask[:]); err != nil {
		return Result{Node: -1, Note: fmt.Sprintf("mbind to node %d refused (%v): allow the node in this job's cpuset (cpuset.mems) or run with numactl --membind", node, err)}
	}
	if err := unix.Madvise(mem, unix.MADV_POPULATE_WRITE); err != nil {
		return Result{Node: node, Note: "pages allocated before not moved: madvise(MADV_POPULATE_WRITE) needs Linux 5.14: " + err.Error()}
	}
	if err := bind(mem, mask[:]); err != nil {
		return Result{Node: node, Note: "pages allocated before not moved: " + err.Error()}
	}
	return Result{Node: node}
}

// bind moves pages other processes map too where this one may
// (CAP_SYS_NICE), else only its own.
func bind(mem []byte, mask []uint64) error {
	err := mbind(mem, mpolPreferred, mask, mpolMFMove|mpolMFMoveAll)
	if errors.Is(err, unix.EPERM) {
		err = mbind(mem, mpolPreferred, mask, mpolMFMove)
	}
	return err
}

func mbind(mem []byte, mode int, mask []uint64, flags int) error {
	_, _, e := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(mode),
		uintptr(unsafe.Pointer(&mask[0])), uintptr(len(mask)*64), uintptr(flags))
	if e != 0 {
		return e
	}
	return nil
}

// wholePages narrows mem to the pages that lie wholly inside it, so that a
// rank's part never moves the page it shares with its neighbour's part.
func wholePages(mem []byte) []byte {
	if len(mem) == 0 {
		return nil
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&mem[0]))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(mem))) &^ (page - 1)
	if hi <= lo {
		return nil
	}
	return mem[lo-start : hi-start]
}
