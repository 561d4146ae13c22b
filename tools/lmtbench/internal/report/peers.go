package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// PeerInfo marks a row measured by another stack's own benchmark program
// (lmtbench peers) and says how.
type PeerInfo struct {
	Stack   string `json:"stack"`   // "Open MPI, default (vader; CMA single copy)"
	Tool    string `json:"tool"`    // "NetPIPE (NPopenmpi)"
	Package string `json:"package"` // the Debian package of the tool
	// Command is the exact command line of the median sample.
	Command string `json:"command"`
}

// AutoVsPeers is how auto did against the fastest peer at one size.
type AutoVsPeers struct {
	Peers   []string    `json:"peers"` // every peer measured at this size
	ByClass []PeerRatio `json:"by_class"`
}

// PeerRatio is the comparison within one placement class. Each peer is
// paired with auto round by round (both samples bracketed in the class);
// the ratio is the median over those rounds of auto's rate over the peer's,
// and the best peer is the one with the lowest such ratio.
type PeerRatio struct {
	Placement string   `json:"placement"`
	Best      string   `json:"best"` // "" when no peer had a paired round
	Rounds    int      `json:"rounds"`
	Ratio     *float64 `json:"ratio"` // null when Rounds is 0; >1: auto is faster
	// NotCompared are the peers with no round paired with auto in this
	// class: their placement never matched auto's.
	NotCompared []string `json:"not_compared,omitempty"`
}

// CompareAutoWithPeers sets AutoVsPeers on every auto row that has peer
// rows beside it (same mode and size).
func CompareAutoWithPeers(results []Result) {
	for i := range results {
		a := &results[i]
		if a.Backend != Auto || a.Peer != nil {
			continue
		}
		var rows []*Result
		for j := range results {
			if r := &results[j]; r.Peer != nil && r.Mode == a.Mode && r.Size == a.Size {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		c := &AutoVsPeers{}
		for _, r := range rows {
			c.Peers = append(c.Peers, r.Backend)
		}
		for _, class := range Classes {
			c.ByClass = append(c.ByClass, versusPeers(a, rows, class))
		}
		a.AutoVsPeers = c
	}
}

func versusPeers(auto *Result, rows []*Result, class string) PeerRatio {
	pr := PeerRatio{Placement: class}
	for _, r := range rows {
		ratios := pairedRatios(auto, []*Result{r}, class)
		if len(ratios) == 0 {
			pr.NotCompared = append(pr.NotCompared, r.Backend)
			continue
		}
		if m := median(ratios); pr.Ratio == nil || m < *pr.Ratio {
			pr.Best, pr.Rounds, pr.Ratio = r.Backend, len(ratios), &m
		}
	}
	return pr
}

// WritePeers prints the table of lmtbench peers: per shape, the toolkit's
// rows and the peers' at each size, auto over the best peer, and the
// command line of each peer.
func WritePeers(w io.Writer, results []Result) error {
	for _, mode := range modes(results) {
		fmt.Fprintf(w, "\n%s; GB/s = 10^9 B/s\n", modeTitles[mode])
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "size\trow\tstack\tlatency µs\tGB/s\tplacement kept/samples\t")
		var autos []*Result
		for _, size := range sizes(results, mode) {
			best := bestPeer(results, mode, size)
			for i := range results {
				r := &results[i]
				if r.Mode != mode || r.Size != size {
					continue
				}
				stack, mark := "knemesis", ""
				if r.Peer != nil {
					stack = r.Peer.Stack
				}
				if r.AutoVsPeers != nil {
					autos = append(autos, r)
				}
				if r == best {
					mark = "◀ best peer"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%s %d/%d\t%s\n", units.Format(size), r.Backend, stack,
					r.LatencyUs, r.BytesPerSec/1e9, r.Placement, r.SamplesKept, r.Samples, mark)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if err := writeAutoVsPeers(w, autos); err != nil {
			return err
		}
		writeCommands(w, results, mode)
	}
	return nil
}

// bestPeer is the peer row with the lowest latency among those of the
// placement class the table's mark compares (far before near).
func bestPeer(results []Result, mode string, size int) *Result {
	var rows []Result
	for _, r := range results {
		if r.Peer != nil && r.Mode == mode && r.Size == size {
			rows = append(rows, r)
		}
	}
	b, _ := winner(rows, mode, size)
	if b == nil {
		return nil
	}
	for i := range results {
		if r := &results[i]; r.Peer != nil && r.Mode == mode && r.Size == size && r.Backend == b.Backend {
			return r
		}
	}
	return nil
}

func writeAutoVsPeers(w io.Writer, autos []*Result) error {
	if len(autos) == 0 {
		return nil
	}
	if !slices.ContainsFunc(autos, func(a *Result) bool { return a.Placement != "unknown" }) {
		_, err := fmt.Fprintln(w, "auto ÷ best peer: not computed — no placement probe, so no sample is known to share a placement")
		return err
	}
	fmt.Fprintln(w, "auto ÷ best peer: per peer, the median over rounds where auto and it stayed in one placement; the best peer is the one auto beats least; >1: auto is faster")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "size\t"+strings.Join(Classes, "\t"))
	for _, a := range autos {
		fmt.Fprint(tw, units.Format(a.Size))
		for _, c := range a.AutoVsPeers.ByClass {
			cell := "not enough same-placement samples"
			if c.Ratio != nil {
				cell = fmt.Sprintf("%.2f vs %s (%d %s)", *c.Ratio, c.Best, c.Rounds, plural(c.Rounds, "round"))
				if len(c.NotCompared) > 0 {
					cell += "; not compared: " + strings.Join(c.NotCompared, ", ")
				}
			}
			fmt.Fprint(tw, "\t"+cell)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// writeCommands prints each peer's command line at the largest size it
// ran in mode: at the other sizes only the size and iteration arguments
// differ (every row's own is in --json and --csv).
func writeCommands(w io.Writer, results []Result, mode string) {
	var names []string
	last := map[string]*Result{}
	for i := range results {
		r := &results[i]
		if r.Peer == nil || r.Mode != mode {
			continue
		}
		if !slices.Contains(names, r.Backend) {
			names = append(names, r.Backend)
		}
		if l := last[r.Backend]; l == nil || r.Size > l.Size {
			last[r.Backend] = r
		}
	}
	if len(names) == 0 {
		return
	}
	fmt.Fprintln(w, "commands (the median sample at the largest size; the tool's own figures converted to the units above):")
	for _, n := range names {
		r := last[n]
		fmt.Fprintf(w, "  %s (%s, %s): %s\n", n, r.Peer.Tool, units.Format(r.Size), r.Peer.Command)
	}
}
