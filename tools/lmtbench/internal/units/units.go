// Package units parses and prints the message sizes lmtbench is given.
//
// Sizes are binary, as in IMB, the OSU benchmarks and NetPIPE: 4K, 4k, 4KB
// and 4KiB all mean 4096 bytes, 1M and 1MiB mean 1048576. A plain number is
// a byte count. A range lo-hi stands for the powers of two from lo to hi
// (lo, 2·lo, 4·lo, … up to hi), the usual sweep of a transfer benchmark.
package units

import (
	"fmt"
	"slices"
	"strings"

	"github.com/knemesis/knemesis/internal/bytesize"
)

// MaxSize bounds one message: 1 GiB is far beyond any crossover worth
// measuring, and a typo like 64G should not try to allocate the machine.
const MaxSize = 1 << 30

// ParseSize parses one size such as "4096", "4K", "64KiB" or "1MiB" (the
// syntax of internal/bytesize), up to MaxSize.
func ParseSize(s string) (int, error) {
	n, err := bytesize.Parse(s, MaxSize)
	return int(n), err
}

// ParseList parses a comma-separated list of sizes and ranges, for example
// "4K-64M" or "0,8,64,4K-16K,1MiB", and returns the sizes in increasing
// order without duplicates. minSize is the smallest size that means
// something to the caller (1 for throughput, 0 for latency).
func ParseList(s string, minSize int) ([]int, error) {
	var out []int
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("sizes %q: empty item", s)
		}
		var sizes []int
		var err error
		if lo, hi, ok := strings.Cut(item, "-"); ok {
			sizes, err = parseRange(item, lo, hi)
		} else {
			var n int
			n, err = ParseSize(item)
			sizes = []int{n}
		}
		if err != nil {
			return nil, err
		}
		for _, n := range sizes {
			if n < minSize {
				return nil, fmt.Errorf("size %q: a %d-byte message means nothing here (smallest is %d)", item, n, minSize)
			}
		}
		out = append(out, sizes...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func parseRange(item, los, his string) ([]int, error) {
	lo, err := ParseSize(los)
	if err != nil {
		return nil, err
	}
	hi, err := ParseSize(his)
	if err != nil {
		return nil, err
	}
	if lo > hi {
		return nil, fmt.Errorf("size range %q: %s is above %s", item, Format(lo), Format(hi))
	}
	if lo == 0 {
		// 0 starts latency sweeps; the doubling continues from 1 byte.
		out := []int{0}
		for n := 1; n <= hi; n *= 2 {
			out = append(out, n)
		}
		return out, nil
	}
	var out []int
	for n := lo; n <= hi; n *= 2 {
		out = append(out, n)
	}
	return out, nil
}

// Format prints a size the short way: 4K, 64K, 1M, or bytes when it is not
// a whole number of KiB.
func Format(n int) string { return bytesize.Short(int64(n)) }
