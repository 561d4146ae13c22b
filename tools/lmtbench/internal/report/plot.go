package report

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// PlotFormats are the file extensions --plot accepts.
var PlotFormats = []string{".png", ".svg"}

// CheckPlotPath rejects a --plot file whose format we cannot write, before
// any measurement runs.
func CheckPlotPath(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	for _, f := range PlotFormats {
		if ext == f {
			return nil
		}
	}
	return fmt.Errorf("--plot %q: want a file ending in .png or .svg", path)
}

// WritePlot draws throughput against message size, both on log scales, one
// line per backend (and mode, when several ran), and saves it to path.
func WritePlot(path string, results []Result, title string) error {
	if err := CheckPlotPath(path); err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "message size (bytes)"
	p.Y.Label.Text = "throughput (GB/s, 10^9 B/s)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())

	multiMode := len(modes(results)) > 1
	var ticks plot.ConstantTicks
	minY, maxY := math.Inf(1), 0.0
	lines := 0
	for _, mode := range modes(results) {
		for _, backend := range backends(results, mode) {
			var pts plotter.XYs
			for _, r := range results {
				if r.Mode == mode && r.Mode != "pollution" && r.Backend == backend && r.BytesPerSec > 0 && r.Size > 0 {
					y := r.BytesPerSec / 1e9
					pts = append(pts, plotter.XY{X: float64(r.Size), Y: y})
					minY, maxY = math.Min(minY, y), math.Max(maxY, y)
					ticks = addTick(ticks, r.Size)
				}
			}
			if len(pts) == 0 {
				continue
			}
			name := backend
			if multiMode {
				name += " " + mode
			}
			if err := plotutil.AddLinePoints(p, name, pts); err != nil {
				return err
			}
			lines++
		}
	}
	if lines == 0 {
		return fmt.Errorf("--plot %q: no throughput results to draw", path)
	}
	p.X.Tick.Marker = ticks
	// LogTicks needs the axis to span at least one power of ten to label it.
	p.Y.Min = math.Pow10(int(math.Floor(math.Log10(minY))))
	p.Y.Max = math.Pow10(int(math.Ceil(math.Log10(maxY))))
	if p.Y.Min == p.Y.Max {
		p.Y.Max *= 10
	}
	return p.Save(22*vg.Centimeter, 14*vg.Centimeter, path)
}

func addTick(ticks plot.ConstantTicks, size int) plot.ConstantTicks {
	for _, t := range ticks {
		if t.Value == float64(size) {
			return ticks
		}
	}
	return append(ticks, plot.Tick{Value: float64(size), Label: units.Format(size)})
}

func backends(results []Result, mode string) []string {
	var out []string
	for _, r := range results {
		if r.Mode == mode && !slices.Contains(out, r.Backend) {
			out = append(out, r.Backend)
		}
	}
	return out
}
