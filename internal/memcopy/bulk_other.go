//go:build !amd64 || race

package memcopy

// The race detector must see every byte copied, and other architectures
// have no REP MOVSB: the built-in copy does all of it.
const bulkCopyWorks = false

func overlap(a, b []byte) bool { return false }

func bulkCopy(dst, src *byte, n uintptr) { panic("memcopy: no bulk copy here") }
