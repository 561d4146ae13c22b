// Package memcopy is the one routine through which knemesis copies message
// payload in user space.
//
// Every user-space copy of payload (Nemesis cells, fastboxes, the shm LMT
// ring) goes through Copy, so that the copy-counting eBPF probes can attach a
// single uprobe to this symbol and read the byte count from its arguments.
// Copy must therefore stay a real, non-inlined function with this signature.
package memcopy

// Symbol is the linker name of Copy, where the uprobes attach.
const Symbol = "github.com/knemesis/knemesis/internal/memcopy.Copy"

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns the
// count, like the built-in copy.
//
//go:noinline
func Copy(dst, src []byte) int {
	return copy(dst, src)
}
