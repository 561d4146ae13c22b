package memplace

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Where returns the node of each whole page of mem, by move_pages(2) with
// no target nodes; a page not present gives a negative errno (-ENOENT).
func Where(mem []byte) ([]int, error) {
	mem = wholePages(mem)
	page := os.Getpagesize()
	n := len(mem) / page
	if n == 0 {
		return nil, nil
	}
	addrs := make([]uintptr, n)
	for i := range addrs {
		addrs[i] = uintptr(unsafe.Pointer(&mem[i*page]))
	}
	status := make([]int32, n)
	_, _, e := unix.Syscall6(unix.SYS_MOVE_PAGES, 0, uintptr(n), uintptr(unsafe.Pointer(&addrs[0])), 0,
		uintptr(unsafe.Pointer(&status[0])), 0)
	if e != 0 {
		return nil, e
	}
	nodes := make([]int, n)
	for i, s := range status {
		nodes[i] = int(s)
	}
	return nodes, nil
}

// Share returns how many of mem's whole pages are on node, of how many.
func Share(mem []byte, node int) (on, total int, err error) {
	nodes, err := Where(mem)
	for _, n := range nodes {
		if n == node {
			on++
		}
	}
	return on, len(nodes), err
}
