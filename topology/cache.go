package topology

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/knemesis/knemesis/internal/bytesize"
)

// CacheType is what a cache holds.
type CacheType string

// Cache types, spelled as sysfs spells them.
const (
	DataCache        CacheType = "Data"
	InstructionCache CacheType = "Instruction"
	UnifiedCache     CacheType = "Unified"
)

// Cache is one cache instance and the CPUs that share it.
type Cache struct {
	Level    int
	Type     CacheType
	Size     int64 // bytes
	LineSize int   // bytes; 0 when unknown
	CPUs     CPUSet
	Source   Source
}

// HoldsData reports whether message payload can live in the cache:
// instruction caches do not count for DMA_min.
func (c Cache) HoldsData() bool { return c.Type != InstructionCache }

// Name is the conventional short name: L1d, L1i, L2, L3.
func (c Cache) Name() string {
	switch c.Type {
	case DataCache:
		return fmt.Sprintf("L%dd", c.Level)
	case InstructionCache:
		return fmt.Sprintf("L%di", c.Level)
	}
	return fmt.Sprintf("L%d", c.Level)
}

func (c Cache) String() string {
	return fmt.Sprintf("%s %s cpus %s (%s)", c.Name(), bytesize.Format(c.Size), c.CPUs, c.Source)
}

// Topology is the cache topology of the machine's online CPUs.
type Topology struct {
	CPUs   CPUSet  // the CPUs described
	Caches []Cache // one entry per cache instance, by level, type, first CPU
	// Notes explains fallbacks and corrections made while detecting, for
	// `lmtbench info`.
	Notes []string
}

// sortCaches puts the caches in a stable, readable order.
func (t *Topology) sortCaches() {
	slices.SortFunc(t.Caches, func(a, b Cache) int {
		return cmp.Or(cmp.Compare(a.Level, b.Level), cmp.Compare(a.Type, b.Type),
			cmp.Compare(first(a.CPUs), first(b.CPUs)))
	})
}

func first(s CPUSet) int {
	if len(s) == 0 {
		return -1
	}
	return s[0]
}

// CachesOf returns the caches that cpu uses, innermost first.
func (t *Topology) CachesOf(cpu int) []Cache {
	var cs []Cache
	for _, c := range t.Caches {
		if c.CPUs.Contains(cpu) {
			cs = append(cs, c)
		}
	}
	return cs
}

// SharedCache returns the outermost data cache that CPUs a and b both use:
// the cache through which a double copy between them can stay on chip.
func (t *Topology) SharedCache(a, b int) (Cache, bool) {
	var best Cache
	found := false
	for _, c := range t.Caches {
		if c.HoldsData() && c.CPUs.Contains(a) && c.CPUs.Contains(b) && (!found || c.Level > best.Level) {
			best, found = c, true
		}
	}
	return best, found
}

// LastLevel returns the outermost data cache of cpu.
func (t *Topology) LastLevel(cpu int) (Cache, bool) {
	var best Cache
	found := false
	for _, c := range t.Caches {
		if c.HoldsData() && c.CPUs.Contains(cpu) && (!found || c.Level > best.Level) {
			best, found = c, true
		}
	}
	return best, found
}

// ProcessesUsing counts the job's processes whose CPU is behind cache c;
// jobCPUs holds one CPU per process (two processes may share a CPU).
func ProcessesUsing(c Cache, jobCPUs []int) int {
	n := 0
	for _, cpu := range jobCPUs {
		if c.CPUs.Contains(cpu) {
			n++
		}
	}
	return n
}
