// Package memcopy is the one routine through which knemesis copies message
// payload in user space.
//
// Every user-space copy of payload (Nemesis cells, fastboxes, the shm LMT
// ring) goes through Copy, so that the copy-counting eBPF probes can attach a
// single uprobe to this symbol and read the byte count from its arguments.
// Copy must therefore stay a real, non-inlined function with this signature.
//
// # Why not the built-in copy
//
// On amd64 the runtime's memmove moves a 32 KiB block with a loop of AVX
// loads and stores. When the two processes of a pair run on different
// physical cores, every line of the shm ring was last written by the other
// core, and that loop pulls such lines several times slower than the
// microcoded REP MOVSB, which glibc's memcpy uses for these sizes on CPUs with
// ERMS: with the built-in copy the ring ran at a third or less of the C
// reference's rate, with REP MOVSB at about its rate (docs/performance.md,
// internal/memcopy). So Copy moves blocks of
// at least BulkMin bytes with REP MOVSB where the CPU has ERMS, and
// everything else with the built-in copy.
package memcopy

// Symbol is the linker name of Copy, where the uprobes attach.
const Symbol = "github.com/knemesis/knemesis/internal/memcopy.Copy"

// BulkMin is the smallest copy Copy hands to the bulk routine: below it the
// start-up cost of REP MOVSB outweighs its gain (glibc's threshold with fast
// short REP MOVSB is about the same).
const BulkMin = 2048

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns the
// count, like the built-in copy, overlapping slices included.
//
//go:noinline
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < BulkMin || !bulkCopyWorks || overlap(dst[:n], src[:n]) {
		return copy(dst, src)
	}
	bulkCopy(&dst[0], &src[0], uintptr(n))
	return n
}
