package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// ReadJSON reads what --json wrote.
func ReadJSON(path string) ([]Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []Result
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("%s: not an lmtbench --json array: %w", path, err)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s: no results", path)
	}
	return rs, nil
}

// WriteMarkdown prints results as the Markdown tables of README.md and
// docs/performance.md: the machine they were measured on, then, per mode,
// the throughput of each backend (columns, in the order of the run) at
// each size (rows), in GB/s of payload; "–" where a backend has no result.
func WriteMarkdown(w io.Writer, rs []Result) error {
	m := rs[0].Machine
	fmt.Fprintf(w, "Measured on %s (%s, kernel %s, %d CPUs: %s), %s; GB/s of payload, median of %d samples.\n",
		m.Hostname, m.CPUModel, m.Kernel, len(m.CPUs), m.Caches, m.Go, rs[0].Samples)
	var modes []string
	for _, r := range rs {
		if !slices.Contains(modes, r.Mode) {
			modes = append(modes, r.Mode)
		}
	}
	for _, mode := range modes {
		var backends []string
		var sizes []int
		type at struct {
			size    int
			backend string
		}
		cell := map[at]string{}
		for _, r := range rs {
			if r.Mode != mode {
				continue
			}
			if !slices.Contains(backends, r.Backend) {
				backends = append(backends, r.Backend)
			}
			if !slices.Contains(sizes, r.Size) {
				sizes = append(sizes, r.Size)
			}
			cell[at{r.Size, r.Backend}] = fmt.Sprintf("%.2f", r.BytesPerSec/1e9)
		}
		slices.Sort(sizes)
		fmt.Fprintf(w, "\n%s:\n\n| size | %s |\n|---|%s\n", mode, strings.Join(backends, " | "), strings.Repeat("---|", len(backends)))
		for _, s := range sizes {
			row := make([]string, len(backends))
			for i, b := range backends {
				if row[i] = cell[at{s, b}]; row[i] == "" {
					row[i] = "–"
				}
			}
			fmt.Fprintf(w, "| %s | %s |\n", units.Format(s), strings.Join(row, " | "))
		}
	}
	return nil
}
