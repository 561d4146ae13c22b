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

// VsPeers is how one of the toolkit's rows did against the fastest peer
// at one size: auto's, at every size, and the fastbox row's (Fastbox) at
// the sizes it was measured.
type VsPeers struct {
	Peers   []string    `json:"peers"` // every peer measured at this size
	ByClass []PeerRatio `json:"by_class"`
}

// PeerRatio is the comparison within one placement class. Each peer is
// paired with the row round by round (both samples bracketed in the
// class); the ratio is the median over those rounds of the row's rate over
// the peer's, and the best peer is the one with the lowest such ratio.
type PeerRatio struct {
	Placement string   `json:"placement"`
	Best      string   `json:"best"` // "" when no peer had a paired round
	Rounds    int      `json:"rounds"`
	Ratio     *float64 `json:"ratio"` // null when Rounds is 0; >1: the toolkit's row is faster
	// NotCompared are the peers with no round paired with the row in
	// this class: their placement never matched its.
	NotCompared []string `json:"not_compared,omitempty"`
}

// Fastbox is the row of the small-message path alone (the eager backend:
// Nemesis cells and fastboxes, no LMT), which lmtbench peers measures
// where a message fits a fastbox.
const Fastbox = "eager"

// CompareWithPeers sets VsPeers on every auto and Fastbox row that has
// peer rows beside it (same mode and size).
func CompareWithPeers(results []Result) {
	for i := range results {
		a := &results[i]
		if a.Backend != Auto && a.Backend != Fastbox || a.Peer != nil {
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
		c := &VsPeers{}
		for _, r := range rows {
			c.Peers = append(c.Peers, r.Backend)
		}
		for _, class := range Classes {
			c.ByClass = append(c.ByClass, versusPeers(a, rows, class))
		}
		a.VsPeers = c
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
// rows and the peers' at each size, auto over the best peer at every size,
// the fastbox row over the best peer where it was measured, and the
// command line of each peer.
func WritePeers(w io.Writer, results []Result) error {
	for _, mode := range modes(results) {
		fmt.Fprintf(w, "\n%s; GB/s = 10^9 B/s\n", modeTitles[mode])
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "size\trow\tstack\tlatency µs\tGB/s\tplacement kept/samples\t")
		var autos, fastboxes []*Result
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
				switch {
				case r.VsPeers != nil && r.Backend == Auto:
					autos = append(autos, r)
				case r.VsPeers != nil:
					fastboxes = append(fastboxes, r)
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
		if err := writeVsPeers(w, autos, "auto ÷ best peer: per peer, the median over rounds where auto and it stayed in one placement; the best peer is the one auto beats least; >1: auto is faster"); err != nil {
			return err
		}
		if err := writeVsPeers(w, fastboxes, "fastbox (eager: Nemesis cells and fastboxes, no LMT) ÷ best peer, where a message fits a fastbox; >1: the fastbox is faster"); err != nil {
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

func writeVsPeers(w io.Writer, rows []*Result, title string) error {
	if len(rows) == 0 {
		return nil
	}
	if !slices.ContainsFunc(rows, func(a *Result) bool { return a.Placement != "unknown" }) {
		_, err := fmt.Fprintf(w, "%s ÷ best peer: not computed — no placement probe, so no sample is known to share a placement\n", rows[0].Backend)
		return err
	}
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "size\t"+strings.Join(Classes, "\t"))
	for _, a := range rows {
		fmt.Fprint(tw, units.Format(a.Size))
		for _, c := range a.VsPeers.ByClass {
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
