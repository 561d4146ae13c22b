package report

import (
	"fmt"
	"html/template"
	"os"
	"path/filepath"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/collbench"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
	"github.com/knemesis/knemesis/topology"
)

// htmlColl is the report's section of lmtbench coll.
type htmlColl struct {
	Placement string // the header line: ranks, CPUs, oversubscribed or not
	Ops       []htmlCollOp
	Choices   []string // the LMT's backend by message size and k, when known
}

type htmlCollOp struct {
	Op      string
	Latency template.HTML // inline SVG; empty for the barrier (one size)
	Rows    []htmlCollRow
	Compare []string
}

type htmlCollRow struct {
	Size, Variant, Class, Latency, Rounds, Note string
}

// WriteCollHTML writes DIR/index.html for lmtbench coll: the machine, then
// per operation a latency plot against size (knemesis solid, the MPI rows
// dashed), the table of every row, and knemesis's ratio to each peer with
// both latencies. placement says how the ranks ran (oversubscribed or
// not); choices, when not empty, are the lines of the backend table.
func WriteCollHTML(dir string, rows []collbench.Row, choices []string, f machine.Facts, title, placement string) (string, error) {
	if len(rows) == 0 {
		return "", fmt.Errorf("--report %s: no coll results to report", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("--report %s: %w", dir, err)
	}
	c := &htmlColl{Placement: placement, Choices: choices}
	for _, r := range rows {
		if len(c.Ops) == 0 || c.Ops[len(c.Ops)-1].Op != r.Op {
			c.Ops = append(c.Ops, htmlCollOp{Op: r.Op})
		}
		op := &c.Ops[len(c.Ops)-1]
		row := htmlCollRow{Size: units.Format(r.Size), Variant: r.Variant, Class: "peer", Latency: fmt.Sprintf("%.2f", r.Latency), Rounds: fmt.Sprint(r.Rounds)}
		if r.Op == collbench.Barrier {
			row.Size = "-"
		}
		if r.Variant == collbench.Knemesis {
			row.Class = "auto"
		}
		if r.Rounds == 0 {
			row.Latency, row.Note = "-", r.Skipped
		}
		if vs := r.VsPeers; vs != nil {
			row.Note = fmt.Sprintf("%.2f vs %s", vs.Ratio, vs.Best)
			op.Compare = append(op.Compare, collCompare(rows, r))
		}
		op.Rows = append(op.Rows, row)
	}
	for i := range c.Ops {
		c.Ops[i].Latency = svgPlot(collResults(rows), "coll-"+c.Ops[i].Op, "latency", "latency µs (per operation)", func(r Result) float64 { return r.LatencyUs })
	}
	page := htmlPage{Title: title, Machine: f, CPUs: topology.CPUSet(f.CPUs).String(), Coll: c}
	path := filepath.Join(dir, ReportFile)
	out, err := os.Create(path)
	if err != nil {
		return "", fmt.Errorf("--report: %w", err)
	}
	if err := pageTemplate.Execute(out, page); err != nil {
		out.Close()
		return "", fmt.Errorf("--report: %w", err)
	}
	return path, out.Close()
}

// collCompare is the line of a knemesis row: its latency and each peer's,
// with the ratio (peer ÷ knemesis: above 1, knemesis is faster).
func collCompare(rows []collbench.Row, k collbench.Row) string {
	size := units.Format(k.Size)
	if k.Op == collbench.Barrier {
		size = "-"
	}
	line := fmt.Sprintf("%s %s, %d ranks: knemesis %.2f µs", k.Op, size, k.Procs, k.Latency)
	for _, r := range rows {
		if r.Op == k.Op && r.Size == k.Size && r.Variant != collbench.Knemesis && r.Rounds > 0 {
			line += fmt.Sprintf("; %s %.2f µs (%.2f)", r.Variant, r.Latency, r.Latency/k.Latency)
		}
	}
	return line
}

// collResults turns the rows into the plot's points: mode "coll-OP", the
// MPI rows marked as peers so that they are drawn dashed.
func collResults(rows []collbench.Row) []Result {
	var out []Result
	for _, r := range rows {
		if r.Rounds == 0 {
			continue
		}
		res := Result{Mode: "coll-" + r.Op, Backend: r.Variant, Size: r.Size, LatencyUs: r.Latency, Procs: r.Procs}
		if r.Variant != collbench.Knemesis {
			res.Peer = &PeerInfo{Stack: r.Variant}
		}
		out = append(out, res)
	}
	return out
}
