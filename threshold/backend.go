package threshold

// Backend names a Large Message Transfer mechanism. The strings are shared
// with package lmt and appear in tuning files and `lmtbench` output.
type Backend string

// The LMT backends, from the most portable to the one that needs a module.
const (
	// Shm is the shared-memory double-buffer copy (two copies, no syscall).
	Shm Backend = "shm"
	// Pipe is writev/readv through a pipe (two copies in the kernel).
	Pipe Backend = "pipe"
	// Vmsplice maps the sender's pages into a pipe; the receiver copies once.
	Vmsplice Backend = "vmsplice"
	// CMA is process_vm_readv/writev: one copy, needs ptrace permission.
	CMA Backend = "cma"
	// CMASplit is CMA with the copy shared: the receiver reads the first
	// half while the sender writes the second.
	CMASplit Backend = "cma-split"
	// Knem is the KNEM-ABI module: one kernel copy, or DMA offload.
	Knem Backend = "knem"
)

// Eager is not an LMT backend: it names the Nemesis cell path, so that
// [Tune] can measure where the LMT starts paying off.
const Eager Backend = "eager"

// Backends lists the LMT backends in the order of the paper's preference
// when no cache is shared: the module, then single copies, then copies.
var Backends = []Backend{Knem, CMA, CMASplit, Vmsplice, Shm, Pipe}

// Valid reports whether b is one of the LMT backends or Eager.
func (b Backend) Valid() bool {
	switch b {
	case Shm, Pipe, Vmsplice, CMA, CMASplit, Knem, Eager:
		return true
	}
	return false
}

// Source says where a threshold or rule came from, so that a surprising
// choice can be traced to a measurement or a formula (a cache's own source
// is a topology.Source: sysfs, CPUID or an override).
type Source string

// Where values come from.
const (
	SourceTuning  Source = "tuning file"
	SourceFormula Source = "formula"
	// SourceDefault marks a fixed constant taken from the paper or from
	// MPICH (the 64 KiB LMT switch), not derived from this machine.
	SourceDefault Source = "default"
	// SourceAPI marks values set by the caller through this package's API.
	SourceAPI Source = "api"
)
