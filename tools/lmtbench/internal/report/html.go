package report

import (
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
	"github.com/knemesis/knemesis/topology"
)

// ReportFile is the page --report DIR writes.
const ReportFile = "index.html"

// Colors of the report's plots: auto stands out, the toolkit's other rows
// are cool colors, the peers warm, the reference grey.
const (
	autoColor = "#d00000"
	refColor  = "#888888"
)

var (
	ownColors  = []string{"#1f5fbf", "#2a9d8f", "#6a4c93", "#3a86ff", "#0b7a75", "#5e60ce", "#118ab2", "#4361ee"}
	peerColors = []string{"#f4a261", "#e76f51", "#bc6c25", "#ff9f1c", "#9c6644", "#e9c46a", "#c77dff", "#8d99ae"}
)

// WriteHTML writes DIR/index.html: one self-contained page (inline SVG and
// CSS, nothing fetched) with the machine, a table per shape, plots of
// throughput and latency against size with auto and the peers
// highlighted, and the copies per byte where they were counted.
func WriteHTML(dir string, results []Result, f machine.Facts, title string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("--report %s: %w", dir, err)
	}
	page := htmlPage{Title: title, Machine: f, CPUs: topology.CPUSet(f.CPUs).String()}
	for _, mode := range modes(results) {
		if mode == "pollution" {
			continue
		}
		page.Modes = append(page.Modes, buildMode(results, mode))
	}
	if len(page.Modes) == 0 {
		return "", fmt.Errorf("--report %s: no throughput results to report", dir)
	}
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

type htmlPage struct {
	Title   string
	Machine machine.Facts
	CPUs    string
	Modes   []htmlMode
	Coll    *htmlColl // lmtbench coll's section
}

type htmlMode struct {
	Mode, Title string
	Rows        []htmlRow
	Throughput  template.HTML // inline SVG
	Latency     template.HTML
	Copies      bool // some row has copies per byte
	Compare     []string
}

type htmlRow struct {
	Size, Name, Stack, Class string
	Latency, GBs, CPU        string
	Copies, Placement        string
}

func buildMode(results []Result, mode string) htmlMode {
	m := htmlMode{Mode: mode, Title: modeTitles[mode]}
	if m.Title == "" {
		m.Title = mode
	}
	for _, r := range results {
		if r.Mode != mode {
			continue
		}
		row := htmlRow{
			Size: units.Format(r.Size), Name: r.Backend, Stack: "knemesis", Class: rowClass(r),
			Latency: fmt.Sprintf("%.2f", r.LatencyUs), GBs: fmt.Sprintf("%.2f", r.BytesPerSec/1e9),
			CPU: "-", Copies: copiesCell(r), Placement: fmt.Sprintf("%s %d/%d", r.Placement, r.SamplesKept, r.Samples),
		}
		if r.Peer != nil {
			row.Stack = r.Peer.Stack
		}
		if r.Reference {
			row.Stack = "reference"
		}
		if r.Peer == nil && r.Size > 0 {
			row.CPU = fmt.Sprintf("%.3f+%.3f", r.CPUSecondsPerBytePerRank[0]*1e9, r.CPUSecondsPerBytePerRank[1]*1e9)
		}
		m.Copies = m.Copies || r.CopiesPerByte != nil
		m.Rows = append(m.Rows, row)
		if a := r.VsPeers; a != nil {
			m.Compare = append(m.Compare, compareLine(units.Format(r.Size), r.Backend, "best peer", peerCells(a)))
		}
		if a := r.AutoVsBest; a != nil {
			m.Compare = append(m.Compare, compareLine(units.Format(r.Size), r.Backend, "best single backend", bestCells(a)))
		}
	}
	m.Throughput = svgPlot(results, mode, "throughput", "GB/s (10^9 B/s)", func(r Result) float64 { return r.BytesPerSec / 1e9 })
	m.Latency = svgPlot(results, mode, "latency", "latency µs (per message)", func(r Result) float64 { return r.LatencyUs })
	return m
}

func compareLine(size, row, what string, cells []string) string {
	return fmt.Sprintf("%s: %s ÷ %s — %s", size, row, what, strings.Join(cells, "; "))
}

func peerCells(a *VsPeers) []string {
	var out []string
	for _, c := range a.ByClass {
		if c.Ratio == nil {
			out = append(out, c.Placement+": not enough same-placement samples")
			continue
		}
		out = append(out, fmt.Sprintf("%s: %.2f vs %s (%d %s)", c.Placement, *c.Ratio, c.Best, c.Rounds, plural(c.Rounds, "round")))
	}
	return out
}

func bestCells(a *AutoVsBest) []string {
	var out []string
	for _, c := range a.ByClass {
		if c.Ratio == nil {
			out = append(out, c.Placement+": not enough same-placement samples")
			continue
		}
		out = append(out, fmt.Sprintf("%s: %.2f (%d %s)", c.Placement, *c.Ratio, c.Rounds, plural(c.Rounds, "round")))
	}
	return out
}

// rowClass is the CSS class and plot style of a row: auto, a peer, the
// reference, or another of the toolkit's backends.
func rowClass(r Result) string {
	switch {
	case r.Peer != nil:
		return "peer"
	case r.Backend == Auto:
		return "auto"
	case r.Reference:
		return "ref"
	}
	return "own"
}

// Plot geometry, in SVG user units.
const (
	plotW, plotH                       = 720, 420
	padLeft, padRight, padTop, padBott = 70, 190, 20, 50
)

// svgPlot draws value against size on log-log axes, one line per row
// name: auto thick and red, peers dashed in warm colors.
func svgPlot(results []Result, mode, id, ylabel string, value func(Result) float64) template.HTML {
	type series struct {
		name, class string
		pts         [][2]float64
	}
	var all []*series
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, r := range results {
		v := value(r)
		if r.Mode != mode || r.Size <= 0 || !(v > 0) || math.IsInf(v, 0) {
			continue
		}
		name := r.Backend
		if r.Reference {
			name += " (ref)"
		}
		i := slices.IndexFunc(all, func(s *series) bool { return s.name == name })
		if i < 0 {
			all = append(all, &series{name: name, class: rowClass(r)})
			i = len(all) - 1
		}
		x, y := math.Log10(float64(r.Size)), math.Log10(v)
		all[i].pts = append(all[i].pts, [2]float64{x, y})
		xmin, xmax, ymin, ymax = math.Min(xmin, x), math.Max(xmax, x), math.Min(ymin, y), math.Max(ymax, y)
	}
	if len(all) == 0 {
		return ""
	}
	ymin, ymax = math.Floor(ymin), math.Ceil(ymax)
	if ymin == ymax {
		ymax++
	}
	if xmin == xmax {
		xmin, xmax = xmin-0.5, xmax+0.5
	}
	iw, ih := float64(plotW-padLeft-padRight), float64(plotH-padTop-padBott)
	px := func(x float64) float64 { return padLeft + (x-xmin)/(xmax-xmin)*iw }
	py := func(y float64) float64 { return padTop + (ymax-y)/(ymax-ymin)*ih }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" id="%s-%s" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s against message size, %s">`,
		id, mode, plotW, plotH, plotW, plotH, id, mode)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="#fff" stroke="#ccc"/>`, padLeft, padTop, iw, ih)
	for e := ymin; e <= ymax; e++ {
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end" class="tick">%s</text>`,
			padLeft, padLeft+iw, py(e), py(e), padLeft-6, py(e)+4, tickLabel(e))
	}
	var sizes []int
	for _, r := range results {
		if r.Mode == mode && r.Size > 0 && !slices.Contains(sizes, r.Size) {
			sizes = append(sizes, r.Size)
		}
	}
	for _, s := range sizes {
		x := px(math.Log10(float64(s)))
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="middle" class="tick">%s</text>`,
			x, x, padTop, padTop+ih, x, padTop+ih+16, units.Format(s))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" class="axis">message size (bytes)</text>`, padLeft+iw/2, plotH-8)
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle" class="axis">%s</text>`, padTop+ih/2, template.HTMLEscapeString(ylabel))
	own, peer := 0, 0
	for i, s := range all {
		color, width, dash := refColor, 1.5, ` stroke-dasharray="2 3"`
		switch s.class {
		case "auto":
			color, width, dash = autoColor, 4, ""
		case "peer":
			color, width, dash = peerColors[peer%len(peerColors)], 2, ` stroke-dasharray="7 4"`
			peer++
		case "own":
			color, width, dash = ownColors[own%len(ownColors)], 1.5, ""
			own++
		}
		slices.SortFunc(s.pts, func(a, b [2]float64) int { return int(math.Copysign(1, a[0]-b[0])) })
		var pts []string
		for _, p := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
		}
		name := template.HTMLEscapeString(s.name)
		fmt.Fprintf(&b, `<g class="series %s" data-name="%s"><polyline fill="none" stroke="%s" stroke-width="%.1f"%s points="%s"/>`,
			s.class, name, color, width, dash, strings.Join(pts, " "))
		for _, p := range pts {
			xy := strings.Split(p, ",")
			fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="%.1f" fill="%s"/>`, xy[0], xy[1], width+1, color)
		}
		ly := float64(padTop+10) + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/><text x="%.1f" y="%.1f" class="legend">%s</text></g>`,
			padLeft+iw+12, padLeft+iw+40, ly, ly, color, width, dash, padLeft+iw+46, ly+4, name)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// tickLabel prints a power of ten: 0.01, 0.1, 1, 10, 100, 1000, 1e+04.
func tickLabel(e float64) string {
	if e >= -3 && e <= 4 {
		return fmt.Sprintf("%g", math.Pow10(int(e)))
	}
	return fmt.Sprintf("1e%+d", int(e))
}

var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { padding: 2px 10px; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f4f4f4; } td.name, td.stack { text-align: left; }
tr.auto td { font-weight: bold; color: ` + autoColor + `; }
tr.peer td.name { color: #b05a00; }
tr.ref td { color: #888; }
dl.machine { display: grid; grid-template-columns: max-content auto; gap: 2px 1em; }
dl.machine dt { font-weight: bold; }
figure { margin: 1em 0; } figcaption { font-size: 0.9em; color: #555; }
.tick { font-size: 11px; fill: #555; } .axis { font-size: 12px; fill: #222; } .legend { font-size: 12px; fill: #222; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<dl class="machine" id="machine">
<dt>CPU</dt><dd>{{.Machine.CPUModel}}</dd>
<dt>CPUs usable</dt><dd>{{.CPUs}}</dd>
<dt>caches</dt><dd>{{.Machine.Caches}}</dd>
<dt>kernel</dt><dd>{{.Machine.Kernel}}</dd>
<dt>host</dt><dd>{{.Machine.Hostname}}</dd>
<dt>Go</dt><dd>{{.Machine.Go}}</dd>
</dl>
{{if .Modes}}<p>Latency is the time per message (half the round trip in ping-pong); GB/s = 10<sup>9</sup> bytes of payload per second.
Each row is the median of its samples kept by the placement probe (same placement before and after; far preferred).
Auto is drawn thick and red, the peers (other stacks, measured by their own benchmarks) dashed.</p>{{end}}
{{range .Modes}}
<section id="mode-{{.Mode}}">
<h2>{{.Title}}</h2>
<figure id="figure-throughput-{{.Mode}}">{{.Throughput}}<figcaption>Throughput against message size, {{.Mode}} (log scales).</figcaption></figure>
<figure id="figure-latency-{{.Mode}}">{{.Latency}}<figcaption>Latency against message size, {{.Mode}} (log scales).</figcaption></figure>
<table id="table-{{.Mode}}">
<thead><tr><th>size</th><th>row</th><th>stack</th><th>latency µs</th><th>GB/s</th><th>CPU ns/B rank0+rank1</th><th>copies/B user/kernel/dma</th><th>placement kept/samples</th></tr></thead>
<tbody>
{{range .Rows}}<tr class="{{.Class}}"><td>{{.Size}}</td><td class="name">{{.Name}}</td><td class="stack">{{.Stack}}</td><td>{{.Latency}}</td><td>{{.GBs}}</td><td>{{.CPU}}</td><td>{{.Copies}}</td><td>{{.Placement}}</td></tr>
{{end}}</tbody>
</table>
{{if not .Copies}}<p class="copies-missing">Copies per byte were not counted in this run (they need the eBPF probes: root, and <code>--copies</code>).</p>{{end}}
{{if .Compare}}<ul class="compare">{{range .Compare}}<li>{{.}}</li>{{end}}</ul>{{end}}
</section>
{{end}}
{{with .Coll}}
<section id="coll">
<h2>Collectives (lmtbench coll)</h2>
<p>{{.Placement}}. OSU-style latency: the slowest rank's mean time per operation, the median over rounds; every variant in turn within each round, on the same CPUs. The ratio is the peer's latency over knemesis's: above 1, knemesis is faster.</p>
{{if .Choices}}<pre id="coll-choices">{{range .Choices}}{{.}}
{{end}}</pre>{{end}}
{{range .Ops}}
<h3 id="coll-{{.Op}}">{{.Op}}</h3>
{{if .Latency}}<figure id="figure-latency-coll-{{.Op}}">{{.Latency}}<figcaption>Latency against size, {{.Op}} (log scales).</figcaption></figure>{{end}}
<table id="table-coll-{{.Op}}">
<thead><tr><th>size</th><th>variant</th><th>latency µs</th><th>rounds</th><th>vs best peer</th></tr></thead>
<tbody>
{{range .Rows}}<tr class="{{.Class}}"><td>{{.Size}}</td><td class="name">{{.Variant}}</td><td>{{.Latency}}</td><td>{{.Rounds}}</td><td class="name">{{.Note}}</td></tr>
{{end}}</tbody>
</table>
{{if .Compare}}<ul class="compare">{{range .Compare}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{end}}
</section>
{{end}}
</body>
</html>
`))
