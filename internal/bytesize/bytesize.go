// Package bytesize reads and writes the byte counts users type and sysfs
// prints: cache sizes ("32K", "32768K"), $KNEMESIS_CACHE levels ("4M"),
// lmtbench message sizes ("64KiB").
//
// Every unit is binary, as sysfs means it and as IMB, the OSU benchmarks and
// NetPIPE print it: K, KB, Ki and KiB all mean 1024 bytes (likewise M and
// G), in any letter case; B or no unit is a byte count. The number is a
// plain decimal integer: no sign, no fraction. Each caller passes the
// largest size that makes sense to it, so that a typo such as 64G cannot
// make a benchmark allocate the machine.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// units maps a lower-case unit to its shift.
var units = map[string]uint{
	"": 0, "b": 0,
	"k": 10, "kb": 10, "ki": 10, "kib": 10,
	"m": 20, "mb": 20, "mi": 20, "mib": 20,
	"g": 30, "gb": 30, "gi": 30, "gib": 30,
}

// Parse reads a size such as "4096", "32K", "4 MiB" or "1G" (surrounding
// space ignored) and refuses one above limit.
func Parse(s string, limit int64) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes such as 4096, 4K or 1MiB", s)
	}
	shift, ok := units[strings.ToLower(strings.TrimSpace(t[i:]))]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, K/KiB, M/MiB or G/GiB)", s, t[i:])
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil || n > limit>>shift {
		return 0, fmt.Errorf("size %q: larger than the %s limit", s, Short(limit))
	}
	return n << shift, nil
}

// Format writes n with the largest binary unit that divides it: "32 KiB",
// "1536 KiB", "100 B".
func Format(n int64) string {
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

// Short writes n the way benchmark tables print sizes: "4K", "64K", "1M",
// or the bare byte count when n is not a whole number of KiB.
func Short(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "G"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "M"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}
