package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/collbench"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

// TestWriteCollHTML: the coll section has a table per operation with
// every row, a plot where there are sizes, the choices, and each
// knemesis row's comparison with both latencies.
func TestWriteCollHTML(t *testing.T) {
	rows := []collbench.Row{
		{Op: collbench.Barrier, Procs: 2, Variant: collbench.Knemesis, Latency: 2, Rounds: 3, VsPeers: &collbench.VsPeers{Best: "openmpi", Ratio: 1.5}},
		{Op: collbench.Barrier, Procs: 2, Variant: "openmpi", Latency: 3, Rounds: 3},
		{Op: collbench.Bcast, Size: 8, Procs: 2, Variant: collbench.Knemesis, Latency: 4, Rounds: 3, VsPeers: &collbench.VsPeers{Best: "openmpi", Ratio: 0.5}},
		{Op: collbench.Bcast, Size: 8, Procs: 2, Variant: "openmpi", Latency: 2, Rounds: 3},
		{Op: collbench.Bcast, Size: 1 << 20, Procs: 2, Variant: collbench.Knemesis, Latency: 100, Rounds: 3},
		{Op: collbench.Bcast, Size: 1 << 20, Procs: 2, Variant: "mpich", Skipped: "mpicc.mpich not found"},
	}
	dir := t.TempDir()
	path, err := WriteCollHTML(dir, rows, []string{"LMT choice header", "  1M  k=1 cma"}, machine.Facts{CPUModel: "test CPU"}, "lmtbench coll", "2 ranks, one per CPU ([0 1])")
	if err != nil || path != filepath.Join(dir, ReportFile) {
		t.Fatalf("%q, %v", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		`<section id="coll">`, `2 ranks, one per CPU ([0 1])`,
		`<table id="table-coll-barrier">`, `<table id="table-coll-bcast">`,
		`<figure id="figure-latency-coll-bcast">`,
		`<pre id="coll-choices">LMT choice header`,
		`<li>barrier -, 2 ranks: knemesis 2.00 µs; openmpi 3.00 µs (1.50)</li>`,
		`<li>bcast 8, 2 ranks: knemesis 4.00 µs; openmpi 2.00 µs (0.50)</li>`,
		`<td class="name">mpicc.mpich not found</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if n := strings.Count(page, `<tr class="auto">`); n != 3 {
		t.Errorf("%d knemesis rows, want 3", n)
	}
	if n := strings.Count(page, `<tr class="peer">`); n != 3 {
		t.Errorf("%d MPI rows, want 3", n)
	}
	if strings.Contains(page, `figure-latency-coll-barrier`) {
		t.Error("a plot for the barrier, which has one size")
	}
	if _, err := WriteCollHTML(t.TempDir(), nil, nil, machine.Facts{}, "", ""); err == nil {
		t.Error("no rows: no error")
	}
}
