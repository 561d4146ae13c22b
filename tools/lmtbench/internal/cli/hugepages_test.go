package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/internal/pages"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/pagebuf"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
)

const mib = 1 << 20

// TestHugepageKinds: on recorded machines, --hugepages runs both kinds
// where huge pages can be had and says which; where they cannot, it runs
// small alone and the line gives internal/pages' reasons, nothing fails.
func TestHugepageKinds(t *testing.T) {
	noPool := pages.System{AnonTHP: "never", AnonTHP2M: "inherit", HugePageSize: 2 * mib}
	thp := pages.System{AnonTHP: "madvise", HugePageSize: 2 * mib}
	pool := pages.System{AnonTHP: "never", HugePageSize: 2 * mib, HugePagesFree: 64}
	on := pages.Config{HugeTLB: true, Cap: 128 * mib}
	for _, c := range []struct {
		name  string
		sys   pages.System
		cfg   pages.Config
		kinds []pagebuf.Kind
		line  string
	}{
		{"no pool, THP never", noPool, on, []pagebuf.Kind{pagebuf.Small},
			"hugepages: no huge pages for lmtbench's buffers here (hugetlb: 0 free huge pages of 2 MiB, this object needs 32 (reserve them: echo 32 > /proc/sys/vm/nr_hugepages); " +
				"thp: transparent_hugepage/enabled is never (echo madvise > /sys/kernel/mm/transparent_hugepage/enabled)); measuring 4 KiB pages only"},
		{"no THP kernel, hugetlb off", pages.System{}, pages.Config{}, []pagebuf.Kind{pagebuf.Small},
			"hugepages: no huge pages for lmtbench's buffers here (thp: no /sys/kernel/mm/transparent_hugepage/enabled (a kernel without CONFIG_TRANSPARENT_HUGEPAGE)); measuring 4 KiB pages only"},
		{"THP madvise", thp, pages.Config{}, []pagebuf.Kind{pagebuf.Small, pagebuf.Huge},
			"hugepages: huge = thp, 2 MiB-aligned anonymous mappings with madvise(MADV_HUGEPAGE); small = anonymous mappings with MADV_NOHUGEPAGE"},
		{"THP, hugetlb asked for but no pool", thp, on, []pagebuf.Kind{pagebuf.Small, pagebuf.Huge},
			"hugepages: huge = thp, 2 MiB-aligned anonymous mappings with madvise(MADV_HUGEPAGE); small = anonymous mappings with MADV_NOHUGEPAGE " +
				"(hugetlb: 0 free huge pages of 2 MiB, this object needs 32 (reserve them: echo 32 > /proc/sys/vm/nr_hugepages))"},
		{"reserved pool", pool, on, []pagebuf.Kind{pagebuf.Small, pagebuf.Huge},
			"hugepages: huge = hugetlb, MAP_HUGETLB mappings, up to KNEMESIS_HUGEPAGES=hugetlb:134217728 bytes per process, then MADV_HUGEPAGE; small = anonymous mappings with MADV_NOHUGEPAGE"},
	} {
		o := &options{pagesHost: func() (pages.System, pages.Config) { return c.sys, c.cfg }}
		kinds, line := o.hugepageKinds(64 * mib)
		if !slices.Equal(kinds, c.kinds) || line != c.line {
			t.Errorf("%s: got %q, %q\nwant %q, %q", c.name, kinds, line, c.kinds, c.line)
		}
	}
}

// TestHugepagesTable: one row per backend and size, each with both
// throughputs, their ratio and what the huge buffers got; a row missing a
// kind shows "-"; the cma estimate subtracts memcpy's time per size.
func TestHugepagesTable(t *testing.T) {
	res := func(backend, kind string, size int, mbs, lat float64) report.Result {
		r := report.Result{Backend: backend, Pages: kind, Size: size, BytesPerSec: mbs * 1e6, LatencyUs: lat}
		if kind == "huge" {
			r.PagesGot, r.HugeBytes, r.BufferBytes = "thp", [2]int64{2 * int64(size), int64(size)}, 2*int64(size)
		}
		return r
	}
	results := []report.Result{
		res("cma", "small", 4*mib, 5000, 800), res("cma", "huge", 4*mib, 7500, 500),
		res("memcpy", "small", 4*mib, 10000, 400), res("memcpy", "huge", 4*mib, 10000, 420),
		res("cma", "small", 8*mib, 4000, 2000), res("cma", "huge", 8*mib, 6000, 1300),
		res("memcpy", "small", 8*mib, 8000, 1000), res("memcpy", "huge", 8*mib, 8000, 1000),
		res("shm", "small", 8*mib, 3000, 2600),
	}
	var b bytes.Buffer
	writeHugepages(&b, results)
	got := strings.Split(b.String(), "\n")
	want := []string{
		"  backend  size  small MB/s  huge MB/s  huge/small      huge got",
		"      cma    4M        5000       7500       1.50x  thp 100%/50%",
		"   memcpy    4M       10000      10000       1.00x  thp 100%/50%",
		"      cma    8M        4000       6000       1.50x  thp 100%/50%",
		"   memcpy    8M        8000       8000       1.00x  thp 100%/50%",
		"      shm    8M        3000          -           -             -",
		"cma pinning and page walk, estimate: cma time per message − memcpy time per message, same run, same page size:",
		"  4M: small 400 µs (800 − 400), huge 80 µs (500 − 420); ceiling of cma huge/small: 1.90x (cma small ÷ memcpy huge)",
		"  8M: small 1000 µs (2000 − 1000), huge 300 µs (1300 − 1000); ceiling of cma huge/small: 2.00x (cma small ÷ memcpy huge)",
	}
	for i, w := range want {
		if i >= len(got) || strings.TrimRight(got[i], " ") != w {
			t.Fatalf("line %d: got %q, want %q\nwhole output:\n%s", i, got[min(i, len(got)-1)], w, b.String())
		}
	}
	if last := got[len(want)]; !strings.HasPrefix(last, "knem: ") {
		t.Fatalf("after the estimate: %q, want the knem line", last)
	}
}
