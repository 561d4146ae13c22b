package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/knemesis/knemesis/internal/pages"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/pagebuf"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// defaultHugepagesSizes are the large messages, where the page size of
// the buffers decides how many pages a transfer pins and walks.
const defaultHugepagesSizes = "4M-64M"

// hugepageKinds decides, as internal/pages does for a private anonymous
// buffer of maxSize, whether huge pages can be had: both kinds when they
// can, else small alone. The line says which huge pages the ranks will ask
// for, or why there are none and what to change; nothing fails.
func (o *options) hugepageKinds(maxSize int) ([]pagebuf.Kind, string) {
	host := o.pagesHost
	if host == nil {
		host = pages.Host
	}
	sys, cfg := host()
	d := pages.Decide(sys, cfg, pages.Anon, int64(maxSize), 0)
	if d.Mode == pages.Small {
		return []pagebuf.Kind{pagebuf.Small}, "hugepages: no huge pages for lmtbench's buffers here (" +
			strings.Join(d.Notes, "; ") + "); measuring 4 KiB pages only"
	}
	how := "2 MiB-aligned anonymous mappings with madvise(MADV_HUGEPAGE)"
	if d.Mode == pages.HugeTLB {
		how = fmt.Sprintf("MAP_HUGETLB mappings, up to %s=hugetlb:%d bytes per process, then MADV_HUGEPAGE", pages.EnvVar, cfg.Cap)
	}
	line := "hugepages: huge = " + d.Mode.String() + ", " + how + "; small = anonymous mappings with MADV_NOHUGEPAGE"
	if len(d.Notes) > 0 {
		line += " (" + strings.Join(d.Notes, "; ") + ")"
	}
	return []pagebuf.Kind{pagebuf.Small, pagebuf.Huge}, line
}

// withMemcpyForCMA adds the memcpy reference where cma runs without it:
// the cma rows' pinning estimate subtracts its time.
func withMemcpyForCMA(bs []engine.Backend) []engine.Backend {
	has := func(name string) bool {
		return slices.ContainsFunc(bs, func(b engine.Backend) bool { return b.Name == name })
	}
	if !has(lmt.CMA) || has("memcpy") {
		return bs
	}
	if m, err := engine.Lookup("memcpy"); err == nil {
		bs = append(bs, m)
	}
	return bs
}

// writeHugepages prints one row per backend and size: the throughput with
// small and with huge buffers, huge/small, and how much of both ranks'
// buffers smaps showed in huge pages; then, for cma, the estimate of its
// pinning and page-walk cost, and the line about knem's.
func writeHugepages(w io.Writer, results []report.Result) {
	type key struct {
		backend string
		size    int
	}
	rows := map[key]*[2]*report.Result{}
	var order []key
	for i := range results {
		r := &results[i]
		k := key{r.Backend, r.Size}
		if rows[k] == nil {
			rows[k] = new([2]*report.Result)
			order = append(order, k)
		}
		switch pagebuf.Kind(r.Pages) {
		case pagebuf.Small:
			rows[k][0] = r
		case pagebuf.Huge:
			rows[k][1] = r
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tsize\tsmall MB/s\thuge MB/s\thuge/small\thuge got\t")
	for _, k := range order {
		s, h := rows[k][0], rows[k][1]
		ratio, got := "-", "-"
		if s != nil && h != nil && s.BytesPerSec > 0 {
			ratio = fmt.Sprintf("%.2fx", h.BytesPerSec/s.BytesPerSec)
		}
		if h != nil {
			got = hugeGot(h)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", k.backend, units.Format(k.size), mbs(s), mbs(h), ratio, got)
	}
	tw.Flush()
	writeCMAEstimate(w, func(size, kind int) (cma, ref *report.Result) {
		a, b := rows[key{lmt.CMA, size}], rows[key{"memcpy", size}]
		if a == nil || b == nil {
			return nil, nil
		}
		return a[kind], b[kind]
	}, sizesOf(results))
	if _, err := os.Stat("/dev/knem"); err != nil {
		fmt.Fprintln(w, "knem: /dev/knem is absent here, so there is no CREATE_REGION time to report; the module runs only in the QEMU guest of ci/")
	} else {
		fmt.Fprintln(w, "knem: CREATE_REGION is not timed apart from the transfer; its rows above include it")
	}
}

// writeCMAEstimate prints, per size, cma's time per message minus the
// memcpy reference's (one user copy between the two ranks, no system
// call, no pinning) with each page size: an estimate of what pinning and
// walking the sender's pages costs, not a measurement of it.
func writeCMAEstimate(w io.Writer, pair func(size, kind int) (cma, ref *report.Result), sizes []int) {
	var lines []string
	for _, size := range sizes {
		var cells [2]string
		some := false
		for kind := range 2 {
			c, r := pair(size, kind)
			cells[kind] = "-"
			if c != nil && r != nil {
				cells[kind] = fmt.Sprintf("%.0f µs (%.0f − %.0f)", c.LatencyUs-r.LatencyUs, c.LatencyUs, r.LatencyUs)
				some = true
			}
		}
		if !some {
			continue
		}
		line := fmt.Sprintf("  %s: small %s, huge %s", units.Format(size), cells[0], cells[1])
		// The most huge pages could give cma: its 4 KiB time over a
		// huge-page memcpy's, were pinning and walking free.
		if cs, _ := pair(size, 0); cs != nil {
			if _, rh := pair(size, 1); rh != nil && rh.LatencyUs > 0 {
				line += fmt.Sprintf("; ceiling of cma huge/small: %.2fx (cma small ÷ memcpy huge)", cs.LatencyUs/rh.LatencyUs)
			}
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "cma pinning and page walk, estimate: cma time per message − memcpy time per message, same run, same page size:")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func sizesOf(results []report.Result) []int {
	var s []int
	for _, r := range results {
		if !slices.Contains(s, r.Size) {
			s = append(s, r.Size)
		}
	}
	slices.Sort(s)
	return s
}

func mbs(r *report.Result) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", r.BytesPerSec/1e6)
}

// hugeGot is the share of each rank's buffers in huge pages, and what
// rank 0's first buffer was given ("thp 100%/100%").
func hugeGot(r *report.Result) string {
	if r.BufferBytes <= 0 {
		return "-"
	}
	pct := func(n int64) string { return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(r.BufferBytes)) }
	return r.PagesGot + " " + pct(r.HugeBytes[0]) + "/" + pct(r.HugeBytes[1])
}
