package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// CPUSet is a sorted list of distinct CPU numbers.
type CPUSet []int

// MaxCPU bounds CPU numbers accepted from text, so that "0-4000000000" in a
// corrupt file or a typo cannot allocate gigabytes.
const MaxCPU = 1 << 16

// ParseCPUList parses the kernel's CPU list format ("0-3,8,10-11"), as found
// in shared_cpu_list and /sys/devices/system/cpu/online.
func ParseCPUList(s string) (CPUSet, error) {
	s = strings.TrimSpace(s)
	var set CPUSet
	if s == "" {
		return set, nil
	}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := parseCPU(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		last := first
		if isRange {
			if last, err = parseCPU(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
			if last < first {
				return nil, fmt.Errorf("cpu list %q: range %s is backwards", s, part)
			}
		}
		for c := first; c <= last; c++ {
			set = append(set, c)
		}
	}
	slices.Sort(set)
	return slices.Compact(set), nil
}

func parseCPU(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	if n < 0 || n >= MaxCPU {
		return 0, fmt.Errorf("CPU %d out of range [0, %d)", n, MaxCPU)
	}
	return n, nil
}

// Contains reports whether cpu is in the set.
func (s CPUSet) Contains(cpu int) bool {
	_, ok := slices.BinarySearch(s, cpu)
	return ok
}

// Equal reports whether both sets hold the same CPUs.
func (s CPUSet) Equal(o CPUSet) bool { return slices.Equal(s, o) }

// String formats the set in the kernel's list format, ranges collapsed.
func (s CPUSet) String() string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}
