package report

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

var modeTitles = map[string]string{
	"pingpong": "ping-pong (IMB: latency is half the round trip)",
	"alltoall": "alltoall, %d processes (latency is the time of one Alltoall; GB/s counts every rank's payload; CPU rank1 sums the other ranks)",
	"latency":  "latency: ping-pong of small messages (half the round trip)",
	"netpipe":  "ping-pong, NetPIPE style (each rank sends back the buffer it just received, dirty in its cache)",
	"bidir":    "bidirectional ping-pong (both ranks send at once; latency and GB/s count both directions' messages)",
	"stream":   "stream (burst: the sender does not wait for replies)",
	"vector":   "vector: ping-pong of a vector datatype, typed against pack (half the round trip; GB/s of payload)",
	"indexed":  "indexed: ping-pong of an indexed datatype, typed against pack (half the round trip; GB/s of payload)",
}

// WriteTable prints the results of each mode as a table, one row per size
// and backend, with the winner of each size marked and summarised. The
// reference yardstick is shown but never wins.
func WriteTable(w io.Writer, results []Result) error {
	for _, mode := range modes(results) {
		if mode == "pollution" {
			if err := writePollution(w, results); err != nil {
				return err
			}
			continue
		}
		title := modeTitles[mode]
		if mode == "alltoall" {
			title = fmt.Sprintf(title, procsOf(results))
		}
		fmt.Fprintf(w, "\n%s; GB/s = 10^9 B/s\n", title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "size\tbackend\tlatency µs\tGB/s\tCPU ns/B rank0+rank1\tcopies/B user/kernel/dma\tplacement kept/samples\t ")
		var summary []string
		var autos []*Result
		for _, size := range sizes(results, mode) {
			best, apart := winner(results, mode, size)
			for i, r := range results {
				if r.Mode != mode || r.Size != size {
					continue
				}
				name, mark := r.Backend, ""
				if r.Reference {
					name += " (ref)"
				}
				if r.Path != "" {
					name += fmt.Sprintf(" [rank %d, %s]", r.Partner, r.Path)
				}
				if best != nil && r.Backend == best.Backend {
					mark = "  ◀ best"
				}
				mark = railsCell(r) + mark
				if r.AutoVsBest != nil {
					autos = append(autos, &results[i])
				}
				cpu := "-"
				if r.Size > 0 {
					cpu = fmt.Sprintf("%.3f+%.3f", r.CPUSecondsPerBytePerRank[0]*1e9, r.CPUSecondsPerBytePerRank[1]*1e9)
				}
				fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%s\t%s\t%s %d/%d\t%s\n",
					units.Format(size), name, r.LatencyUs, r.BytesPerSec/1e9,
					cpu, copiesCell(r), r.Placement, r.SamplesKept, r.Samples, mark)
			}
			switch {
			case best != nil && len(apart) > 0:
				summary = append(summary, fmt.Sprintf("%s %s (%s; %d %s apart)",
					units.Format(size), best.Backend, best.Placement, len(apart), plural(len(apart), "row")))
			case best != nil:
				summary = append(summary, units.Format(size)+" "+best.Backend)
			case len(apart) > 0:
				summary = append(summary, units.Format(size)+" none (placement moved)")
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if len(summary) > 0 {
			fmt.Fprintf(w, "best backend per size: %s\n", strings.Join(summary, ", "))
		} else {
			fmt.Fprintln(w, "best backend per size: none — no toolkit backend ran, only the reference")
		}
		if err := writeAutoVsBest(w, autos); err != nil {
			return err
		}
		if err := writeVsReference(w, results, mode); err != nil {
			return err
		}
		if err := writeSplitVsCMA(w, results, mode); err != nil {
			return err
		}
		if err := writeTypedVsPack(w, results, mode); err != nil {
			return err
		}
	}
	return nil
}

// writeVsReference prints, per size, each selector's throughput over the
// memcpy reference's, both medians of this run, both sides shown: how near
// the automatic choice comes to one user copy and a cache-line handshake.
func writeVsReference(w io.Writer, results []Result, mode string) error {
	var lines []string
	for _, size := range sizes(results, mode) {
		var ref *Result
		for i := range results {
			if r := &results[i]; r.Mode == mode && r.Size == size && r.Reference && r.Backend == "memcpy" {
				ref = r
			}
		}
		if ref == nil || ref.BytesPerSec == 0 {
			continue
		}
		for _, sel := range Selectors {
			for _, r := range results {
				if r.Mode == mode && r.Size == size && r.Backend == sel && !r.Reference {
					lines = append(lines, fmt.Sprintf("%s\t%s\t%.2f GB/s ÷ %.2f GB/s\t= %.2f",
						units.Format(size), sel, r.BytesPerSec/1e9, ref.BytesPerSec/1e9, r.BytesPerSec/ref.BytesPerSec))
				}
			}
		}
	}
	if len(lines) == 0 {
		return nil
	}
	fmt.Fprintln(w, "selector ÷ memcpy reference (medians of this run; 1: as fast as one user copy)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range lines {
		fmt.Fprintln(tw, l)
	}
	return tw.Flush()
}

// railsCell shows how a split backend cut the message: the percent of it
// each rail moved, the receiver's read, the knem module's copy and the
// shm ring when they had a piece, and the sender's write; empty for the
// others.
func railsCell(r Result) string {
	var total int64
	for _, v := range r.Rails {
		total += v
	}
	if total == 0 {
		return ""
	}
	var names, pcts []string
	for _, rail := range []lmt.Rail{lmt.ReadRail, lmt.KnemRail, lmt.RingRail, lmt.WriteRail} {
		if v := r.Rails[rail]; v > 0 || rail == lmt.ReadRail || rail == lmt.WriteRail {
			names = append(names, rail.String())
			pcts = append(pcts, strconv.FormatInt((100*v+total/2)/total, 10))
		}
	}
	return "  rails " + strings.Join(names, ":") + " " + strings.Join(pcts, ":")
}

// singleRails are the one-rail backends a split backend is measured
// against: the receiver's process_vm_readv alone, the sender's
// process_vm_writev alone, and the knem module's copy alone (where
// /dev/knem works).
var singleRails = []string{lmt.CMA, lmt.CMAWrite, lmt.Knem}

// writeSplitVsCMA prints, per size, each split backend's throughput over
// the best single-rail CMA backend's of this run at that size, both
// medians and that backend's name shown, with the cut the split backend
// made.
func writeSplitVsCMA(w io.Writer, results []Result, mode string) error {
	var lines []string
	for _, size := range sizes(results, mode) {
		var single *Result
		for i := range results {
			r := &results[i]
			if r.Mode == mode && r.Size == size && slices.Contains(singleRails, r.Backend) && (single == nil || r.BytesPerSec > single.BytesPerSec) {
				single = r
			}
		}
		if single == nil || single.BytesPerSec == 0 {
			continue
		}
		for _, r := range results {
			if r.Mode == mode && r.Size == size && r.Rails != [lmt.NumRails]int64{} {
				lines = append(lines, fmt.Sprintf("%s\t%s ÷ %s\t%.2f GB/s ÷ %.2f GB/s\t= %.2f%s",
					units.Format(size), r.Backend, single.Backend, r.BytesPerSec/1e9, single.BytesPerSec/1e9, r.BytesPerSec/single.BytesPerSec, railsCell(r)))
			}
		}
	}
	if len(lines) == 0 {
		return nil
	}
	fmt.Fprintln(w, "split ÷ best single rail of the run, CMA read, CMA write or knem (medians; above 1: the other rails pay)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, l := range lines {
		fmt.Fprintln(tw, l)
	}
	return tw.Flush()
}

// writeAutoVsBest prints CompareAuto's ratios, one block per selector and
// one line per size.
func writeAutoVsBest(w io.Writer, all []*Result) error {
	for _, sel := range Selectors {
		var autos []*Result
		for _, a := range all {
			if a.Backend == sel {
				autos = append(autos, a)
			}
		}
		if err := writeSelectorVsBest(w, sel, autos); err != nil {
			return err
		}
	}
	return nil
}

func writeSelectorVsBest(w io.Writer, sel string, autos []*Result) error {
	if len(autos) == 0 {
		return nil
	}
	if !slices.ContainsFunc(autos, func(a *Result) bool { return a.Placement != "unknown" }) {
		_, err := fmt.Fprintln(w, sel+" ÷ best single backend: not computed — no placement probe, so no sample is known to share a placement")
		return err
	}
	// Only the classes some size has rounds in: one column on a machine
	// with one placement regime.
	var cols []string
	for _, c := range Classes {
		if slices.ContainsFunc(autos, func(a *Result) bool {
			return slices.ContainsFunc(a.AutoVsBest.ByClass, func(r ClassRatios) bool { return r.Placement == c && r.Rounds > 0 })
		}) {
			cols = append(cols, c)
		}
	}
	if len(cols) == 0 {
		_, err := fmt.Fprintf(w, "%s ÷ best single backend: no round in which %s and every backend kept one placement\n", sel, sel)
		return err
	}
	fmt.Fprintf(w, "%s ÷ best single backend of %s (median over rounds in one placement; >1: %s faster)\n",
		sel, strings.Join(autos[0].AutoVsBest.Backends, ", "), sel)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "size\t"+strings.Join(cols, "\t"))
	for _, a := range autos {
		fmt.Fprint(tw, units.Format(a.Size))
		for _, col := range cols {
			cell := "-"
			for _, c := range a.AutoVsBest.ByClass {
				if c.Placement == col && c.Ratio != nil {
					cell = fmt.Sprintf("%.2f (%d %s)", *c.Ratio, c.Rounds, plural(c.Rounds, "round"))
				}
			}
			fmt.Fprint(tw, "\t"+cell)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func copiesCell(r Result) string {
	if r.CopiesPerByte == nil {
		return "-"
	}
	cell := func(who string) string {
		v, ok := r.CopiesPerByte[who]
		if !ok {
			return "?"
		}
		return fmt.Sprintf("%.2f", v)
	}
	return cell("user") + "/" + cell("kernel") + "/" + cell("dma")
}

// winner is the fastest non-reference result of a mode and size: the
// lowest latency, which at one size is the highest throughput too, and
// still means something for empty messages. Only rows of one placement
// class are compared: far ones when there are any, else near, else
// unknown; apart names the rows of other classes (and mixed ones), left out.
func winner(results []Result, mode string, size int) (best *Result, apart []string) {
	var rows []*Result
	for i := range results {
		if r := &results[i]; r.Mode == mode && r.Size == size && !r.Reference {
			rows = append(rows, r)
		}
	}
	class := ""
	for _, c := range []string{"unknown", machine.All, "near", "far"} {
		if slices.ContainsFunc(rows, func(r *Result) bool { return r.Placement == c }) {
			class = c
		}
	}
	for _, r := range rows {
		switch {
		case r.Placement != class:
			apart = append(apart, r.Backend+" "+r.Placement)
		case best == nil || r.LatencyUs < best.LatencyUs:
			best = r
		}
	}
	return best, apart
}

func modes(results []Result) []string {
	var out []string
	for _, r := range results {
		if !slices.Contains(out, r.Mode) {
			out = append(out, r.Mode)
		}
	}
	return out
}

func sizes(results []Result, mode string) []int {
	var out []int
	for _, r := range results {
		if r.Mode == mode && !slices.Contains(out, r.Size) {
			out = append(out, r.Size)
		}
	}
	return out
}

// writePollution prints the receiver's re-read slowdown per size and
// backend; the least polluting backend of each size is marked.
func writePollution(w io.Writer, results []Result) error {
	ws := 0
	for _, r := range results {
		if r.Pollution != nil {
			ws = r.Pollution.WorkingSet
		}
	}
	fmt.Fprintf(w, "\npollution: the receiver re-reads a %s working set after each message; slowdown = re-read time after a transfer / without one\n", units.Format(ws))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tbackend\tslowdown\tre-read µs without\twith transfer\tcache misses without/with\tplacement kept/samples\t ")
	for _, size := range sizes(results, "pollution") {
		var best *Result
		for i := range results {
			r := &results[i]
			if r.Mode == "pollution" && r.Size == size && r.Pollution != nil && !r.Reference &&
				(best == nil || r.Pollution.Slowdown < best.Pollution.Slowdown) {
				best = r
			}
		}
		for _, r := range results {
			p := r.Pollution
			if r.Mode != "pollution" || r.Size != size || p == nil {
				continue
			}
			name, mark := r.Backend, ""
			if r.Reference {
				name += " (ref)"
			}
			if best != nil && r.Backend == best.Backend {
				mark = "  ◀ least"
			}
			misses := p.MissesNote
			if misses == "" {
				misses = fmt.Sprintf("%d/%d", p.BaselineMisses, p.AfterMisses)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f×\t%.1f\t%.1f\t%s\t%s %d/%d\t%s\n", units.Format(size), name, p.Slowdown,
				float64(p.BaselineNs)/1e3, float64(p.AfterNs)/1e3, misses, r.Placement, r.SamplesKept, r.Samples, mark)
		}
	}
	return tw.Flush()
}

func procsOf(results []Result) int {
	for _, r := range results {
		if r.Mode == "alltoall" {
			return r.Procs
		}
	}
	return 0
}
