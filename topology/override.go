package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/knemesis/knemesis/internal/bytesize"
)

// EnvCache names the environment variable that overrides detected caches,
// for machines (virtual ones, mostly) whose sysfs and CPUID both lie.
//
// Its value is a ';'-separated list of LEVEL:SIZE:GROUPS entries. LEVEL is
// L1d, L1i or Ln (unified); SIZE is a size such as 512K or 32M; GROUPS is a
// ','-separated list of sharing groups, each a CPU range or several joined
// by '+':
//
//	KNEMESIS_CACHE="L2:4M:0+4,2+6,1+5,3+7"      # the paper's Xeon E5345
//	KNEMESIS_CACHE="L2:512K:0,1;L3:32M:0-1"     # two cores sharing an L3
//
// An entry replaces every detected cache of that level (and type, for L1d
// and L1i); other levels are kept.
const EnvCache = "KNEMESIS_CACHE"

// CacheOverride is a parsed $KNEMESIS_CACHE value.
type CacheOverride []OverrideLevel

// OverrideLevel replaces the caches of one level with the given groups.
type OverrideLevel struct {
	Level  int
	Type   CacheType
	Size   int64
	Groups []CPUSet
}

// ParseOverride parses the $KNEMESIS_CACHE syntax.
func ParseOverride(spec string) (CacheOverride, error) {
	var o CacheOverride
	for _, entry := range strings.Split(spec, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		fields := strings.Split(entry, ":")
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s entry %q: want LEVEL:SIZE:GROUPS, e.g. L2:4M:0-1,2-3", EnvCache, entry)
		}
		lvl, err := parseLevel(fields[0])
		if err != nil {
			return nil, fmt.Errorf("%s entry %q: %w", EnvCache, entry, err)
		}
		if lvl.Size, err = bytesize.Parse(fields[1], maxCacheSize); err != nil || lvl.Size == 0 {
			return nil, fmt.Errorf("%s entry %q: bad size %q", EnvCache, entry, fields[1])
		}
		seen := map[int]bool{}
		for _, g := range strings.Split(fields[2], ",") {
			set, err := ParseCPUList(strings.ReplaceAll(g, "+", ","))
			if err != nil || len(set) == 0 {
				return nil, fmt.Errorf("%s entry %q: bad CPU group %q", EnvCache, entry, g)
			}
			for _, cpu := range set {
				if seen[cpu] {
					return nil, fmt.Errorf("%s entry %q: cpu%d is in two groups", EnvCache, entry, cpu)
				}
				seen[cpu] = true
			}
			lvl.Groups = append(lvl.Groups, set)
		}
		for _, prev := range o {
			if prev.Level == lvl.Level && (prev.Type == lvl.Type || prev.Type == UnifiedCache || lvl.Type == UnifiedCache) {
				return nil, fmt.Errorf("%s: level %s given twice", EnvCache, fields[0])
			}
		}
		o = append(o, lvl)
	}
	if len(o) == 0 {
		return nil, fmt.Errorf("%s is empty", EnvCache)
	}
	return o, nil
}

func parseLevel(s string) (OverrideLevel, error) {
	t := strings.TrimSpace(s)
	var l OverrideLevel
	if len(t) < 2 || (t[0] != 'L' && t[0] != 'l') {
		return l, fmt.Errorf("level %q: want L1d, L1i, L2, L3", s)
	}
	t = t[1:]
	l.Type = UnifiedCache
	switch {
	case strings.HasSuffix(t, "d"):
		l.Type, t = DataCache, strings.TrimSuffix(t, "d")
	case strings.HasSuffix(t, "i"):
		l.Type, t = InstructionCache, strings.TrimSuffix(t, "i")
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 1 || n > 7 {
		return l, fmt.Errorf("level %q: want L1d, L1i, L2, L3", s)
	}
	l.Level = n
	return l, nil
}

// Apply returns a copy of t with the override's levels replaced. CPUs named
// in the override must be CPUs of t; when t is nil (nothing detected), the
// override alone describes the machine.
func (o CacheOverride) Apply(t *Topology) (*Topology, error) {
	out := &Topology{}
	if t != nil {
		out.CPUs = slices.Clone(t.CPUs)
		out.Notes = slices.Clone(t.Notes)
	}
	for _, c := range topologyCaches(t) {
		if !o.replaces(c) {
			out.Caches = append(out.Caches, c)
		}
	}
	for _, l := range o {
		for _, g := range l.Groups {
			for _, cpu := range g {
				if t != nil && !t.CPUs.Contains(cpu) {
					return nil, fmt.Errorf("%s: cpu%d in L%d is not an online CPU (%s)", EnvCache, cpu, l.Level, t.CPUs)
				}
			}
			if t == nil {
				out.CPUs = append(out.CPUs, g...)
			}
			out.Caches = append(out.Caches, Cache{Level: l.Level, Type: l.Type, Size: l.Size,
				LineSize: lineSizeAt(t, l.Level), CPUs: slices.Clone(g), Source: SourceOverride})
		}
	}
	slices.Sort(out.CPUs)
	out.CPUs = slices.Compact(out.CPUs)
	out.sortCaches()
	return out, nil
}

func topologyCaches(t *Topology) []Cache {
	if t == nil {
		return nil
	}
	return t.Caches
}

func (o CacheOverride) replaces(c Cache) bool {
	for _, l := range o {
		if l.Level == c.Level && (l.Type == UnifiedCache || l.Type == c.Type) {
			return true
		}
	}
	return false
}

// lineSizeAt keeps the detected line size: the override syntax has no
// field for it and it does not enter any threshold.
func lineSizeAt(t *Topology, level int) int {
	for _, c := range topologyCaches(t) {
		if c.Level == level && c.LineSize > 0 {
			return c.LineSize
		}
	}
	return 64
}
