package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

// peerRows is auto and one peer at two sizes, as lmtbench peers makes them.
func peerRows() []Result {
	var rs []Result
	for _, size := range []int{8, 1 << 20} {
		rs = append(rs,
			Result{Mode: "netpipe", Backend: Auto, Size: size, BytesPerSec: 2e9, LatencyUs: float64(size) / 2e3, Samples: 1, SamplesKept: 1, Placement: "far"},
			Result{Mode: "netpipe", Backend: "ompi", Size: size, BytesPerSec: 1e9, LatencyUs: float64(size) / 1e3, Samples: 1, SamplesKept: 1, Placement: "far",
				Peer: &PeerInfo{Stack: "Open MPI, default", Tool: "NetPIPE (NPopenmpi)", Package: "netpipe-openmpi",
					Command: "mpirun.openmpi -np 2 NPopenmpi -l 8 -u 8 -o '/tmp/a b'"}})
	}
	return rs
}

// The peer rows travel in every output: CSV's peer columns (the command
// quoted as CSV needs), JSON's peer object, the plot's legend and the
// HTML page's table and lines.
func TestPeerRowsInEveryOutput(t *testing.T) {
	rs := peerRows()
	var b bytes.Buffer
	if err := WriteCSV(&b, rs); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head := recs[0]
	col := func(name string) int {
		for i, h := range head {
			if h == name {
				return i
			}
		}
		t.Fatalf("no CSV column %s in %v", name, head)
		return -1
	}
	stack, cmd, backend := col("peer_stack"), col("peer_command"), col("backend")
	if len(recs) != 5 || recs[1][backend] != "auto" || recs[1][stack] != "" || recs[2][backend] != "ompi" ||
		recs[2][stack] != "Open MPI, default" || recs[2][cmd] != "mpirun.openmpi -np 2 NPopenmpi -l 8 -u 8 -o '/tmp/a b'" {
		t.Errorf("CSV rows %q", recs)
	}

	b.Reset()
	if err := WriteJSON(&b, rs); err != nil {
		t.Fatal(err)
	}
	var back []Result
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back) != 4 || back[0].Peer != nil || back[1].Peer == nil || *back[1].Peer != *rs[1].Peer {
		t.Errorf("JSON round trip: %+v", back)
	}

	dir := t.TempDir()
	svg := filepath.Join(dir, "p.svg")
	if err := WritePlot(svg, rs, "t"); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{">auto<", ">ompi<"} {
		if !bytes.Contains(page, []byte(name)) {
			t.Errorf("plot legend lacks %s", name)
		}
	}

	path, err := WriteHTML(dir, rs, machine.Facts{CPUModel: "cpu"}, "peers")
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`<tr class="peer"><td>1M</td><td class="name">ompi</td><td class="stack">Open MPI, default</td><td>1048.58</td><td>1.00</td>`,
		`<g class="series auto" data-name="auto">`,
		`<g class="series peer" data-name="ompi"><polyline fill="none" stroke="#f4a261" stroke-width="2.0" stroke-dasharray="7 4"`,
	} {
		if !strings.Contains(string(html), want) {
			t.Errorf("page lacks %s", want)
		}
	}
}
