//go:build amd64 && !race

package memcopy

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// bulkCopyWorks is false on CPUs without ERMS, where REP MOVSB is a slow
// byte loop.
var bulkCopyWorks = cpu.X86.HasERMS

// overlap reports whether a and b, of equal length, share a byte: a forward
// REP MOVSB would read bytes it has already overwritten.
func overlap(a, b []byte) bool {
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	n := uintptr(len(a))
	return pa < pb+n && pb < pa+n
}

// bulkCopy copies n bytes from src to dst with REP MOVSB; the ranges must
// not overlap.
//
//go:noescape
func bulkCopy(dst, src *byte, n uintptr)
