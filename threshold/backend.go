package threshold

import (
	"slices"

	"github.com/knemesis/knemesis/lmt"
)

// Backend names a Large Message Transfer mechanism: the name of its
// lmt.Identity, as tuning files and `lmtbench` output spell it.
type Backend string

// The LMT backends the selection and the tuning files know
// (lmt.Identities describes each); cma-write is used only when forced.
const (
	Shm      Backend = lmt.Shm
	Pipe     Backend = lmt.Pipe
	Vmsplice Backend = lmt.Vmsplice
	CMA      Backend = lmt.CMA
	CMASplit Backend = lmt.CMASplit
	// MultiRail is cma-split cut by each rail's measured speed; it needs
	// what CMA needs, and is refused where CMA is.
	MultiRail Backend = lmt.MultiRail
	Knem      Backend = lmt.Knem
	// ArenaCopy is no table's choice: a Learner weighs it, up to its
	// lmt.Identity's MaxLen, where the job has an arena.
	ArenaCopy Backend = lmt.ArenaCopy
)

// Eager is not an LMT backend: it names the Nemesis cell path, so that
// [Tune] can measure where the LMT starts paying off.
const Eager Backend = "eager"

// Backends lists the LMT backends the tables choose from, in the order of
// the paper's preference when no cache is shared: the module, then single
// copies, then double copies (each lmt.Identity's Choice).
var Backends = choices()

func choices() []Backend {
	var bs []Backend
	for _, name := range lmt.Choices() {
		bs = append(bs, Backend(name))
	}
	return bs
}

// Valid reports whether b is one of the LMT backends (those of Backends,
// and ArenaCopy) or Eager.
func (b Backend) Valid() bool {
	return b == Eager || b == ArenaCopy || slices.Contains(Backends, b)
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
