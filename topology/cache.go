package threshold

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	return fmt.Sprintf("%s %s cpus %s (%s)", c.Name(), FormatSize(c.Size), c.CPUs, c.Source)
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

// ParseSize parses a cache or message size: a byte count with an optional
// binary suffix K, M or G (sysfs writes "32K", "32768K"); "KiB"/"MiB"/"GiB"
// and "KB"/"MB"/"GB" are read as the same binary units, as sysfs means them.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	shift := 0
	upper := strings.ToUpper(t)
	for _, suf := range []struct {
		text  string
		shift int
	}{{"KIB", 10}, {"MIB", 20}, {"GIB", 30}, {"KB", 10}, {"MB", 20}, {"GB", 30}, {"K", 10}, {"M", 20}, {"G", 30}, {"B", 0}} {
		if strings.HasSuffix(upper, suf.text) {
			t, shift = strings.TrimSpace(t[:len(t)-len(suf.text)]), suf.shift
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a non-negative number with an optional K, M or G suffix", s)
	}
	if n > (1<<62)>>shift {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n << shift, nil
}

// FormatSize writes n bytes with the largest binary unit that divides it.
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
