package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
)

// measureLayout is appended to a copy of the report before Chromium
// renders it: it writes, on each figure, the size its SVG was laid out
// at and each series' name, class and polyline extent, so that the
// dumped DOM says what a reader would see.
const measureLayout = `<script>
for (const f of document.querySelectorAll("figure")) {
  const svg = f.querySelector("svg");
  if (!svg) { f.setAttribute("data-rendered", "no-svg"); continue; }
  const r = svg.getBoundingClientRect();
  const series = [...svg.querySelectorAll("g.series")].map(g => {
    const b = g.querySelector("polyline").getBBox();
    return g.dataset.name + "|" + g.classList[1] + "|" + Math.round(b.width) + "|" + g.querySelectorAll("circle").length;
  });
  f.setAttribute("data-rendered", Math.round(r.width) + "x" + Math.round(r.height) + ";" + series.join(";"));
}
</script>`

// renderedFigure is what Chromium laid out for one figure.
type renderedFigure struct {
	width, height int
	series        map[string]renderedSeries // by row name
}

type renderedSeries struct {
	class  string // auto, peer, own, ref
	width  int    // horizontal extent of the polyline, in SVG units
	points int
}

// renderReport renders dir's report in headless Chromium and returns the
// figures by id, and the dumped DOM.
func renderReport(t *testing.T, dir string) (map[string]renderedFigure, string) {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("lacks chromium: chromium not installed (apt-get install chromium; make deps installs it through mk/report.mk)")
	}
	page, err := os.ReadFile(filepath.Join(dir, report.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	// Self-contained: nothing the page shows may come from elsewhere.
	for _, ref := range []string{"src=", "href=", "@import", "url("} {
		if strings.Contains(string(page), ref) {
			t.Errorf("the page refers to something outside it (%q)", ref)
		}
	}
	probe := filepath.Join(t.TempDir(), "probe.html")
	withScript := strings.Replace(string(page), "</body>", measureLayout+"</body>", 1)
	if err := os.WriteFile(probe, []byte(withScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// --no-sandbox: the tests run as root, where Chromium's sandbox refuses to start.
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--user-data-dir="+t.TempDir(), "--dump-dom", "file://"+probe)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	figures := map[string]renderedFigure{}
	re := regexp.MustCompile(`<figure id="([^"]+)" data-rendered="([^"]*)"`)
	for _, m := range re.FindAllStringSubmatch(string(dom), -1) {
		parts := strings.Split(m[2], ";")
		var f renderedFigure
		if f.width, f.height, err = parseWxH(parts[0]); err != nil {
			t.Fatalf("figure %s: %q: %v", m[1], m[2], err)
		}
		f.series = map[string]renderedSeries{}
		for _, s := range parts[1:] {
			fields := strings.Split(s, "|")
			if len(fields) != 4 {
				t.Fatalf("figure %s: series %q", m[1], s)
			}
			w, _ := strconv.Atoi(fields[2])
			n, _ := strconv.Atoi(fields[3])
			f.series[fields[0]] = renderedSeries{class: fields[1], width: w, points: n}
		}
		figures[m[1]] = f
	}
	return figures, string(dom)
}

// parseWxH reads "720x420".
func parseWxH(s string) (w, h int, err error) {
	a, b, ok := strings.Cut(s, "x")
	if !ok {
		return 0, 0, strconv.ErrSyntax
	}
	if w, err = strconv.Atoi(a); err != nil {
		return 0, 0, err
	}
	h, err = strconv.Atoi(b)
	return w, h, err
}

// checkFigures asserts that both plots of mode were laid out at their
// full size with one line per row name, drawn across every size, in the
// class that highlights it.
func checkFigures(t *testing.T, figures map[string]renderedFigure, mode string, sizes int, want map[string]string) {
	t.Helper()
	for _, kind := range []string{"throughput", "latency"} {
		id := "figure-" + kind + "-" + mode
		f, ok := figures[id]
		if !ok {
			t.Errorf("%s: not in the rendered page", id)
			continue
		}
		if f.width != 720 || f.height != 420 {
			t.Errorf("%s: laid out at %dx%d, want 720x420", id, f.width, f.height)
		}
		for name, class := range want {
			s, ok := f.series[name]
			switch {
			case !ok:
				t.Errorf("%s: no line for %s (lines: %v)", id, name, f.series)
			case s.class != class || s.points != sizes || s.width < 100:
				t.Errorf("%s: %s drawn as %+v; want class %s, %d points spread over the plot", id, name, s, class, sizes)
			}
		}
	}
}

// TestReportRendersInChromium: --report writes a page that headless
// Chromium lays out with the machine, the table and both plots, auto's
// line highlighted beside the other backends'.
func TestReportRendersInChromium(t *testing.T) {
	dir := t.TempDir()
	r := run(t, append([]string{"pingpong", "--backends", "auto,shm,memcpy", "--sizes", "4K,64K,1M", "--report", dir}, fast...)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if want := "report: " + filepath.Join(dir, report.ReportFile) + "\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
	}
	figures, dom := renderReport(t, dir)
	checkFigures(t, figures, "pingpong", 3, map[string]string{"auto": "auto", "shm": "own", "memcpy (ref)": "ref"})
	for _, want := range []string{`<dl class="machine" id="machine">`, `<table id="table-pingpong">`, `<tr class="auto"><td>1M</td><td class="name">auto</td>`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
}

func TestReportBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"info", "--report", "x"}, "lmtbench: --report draws throughput and latency; info has none to report\n"},
		{[]string{"pingpong", "--vm", "--report", "x"}, "lmtbench: --report with --vm: the guest's files vanish when it powers off\n"},
	} {
		r := run(t, tc.args...)
		if r.code != 2 || r.stderr != tc.want {
			t.Errorf("lmtbench %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
	// A directory that cannot be made is an error naming it, after the
	// table (the measurement is not thrown away silently).
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, append([]string{"pingpong", "--backends", "memcpy", "--sizes", "4K", "--report", filepath.Join(file, "dir")}, fast...)...)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "lmtbench: --report "+filepath.Join(file, "dir")+": mkdir ") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}
