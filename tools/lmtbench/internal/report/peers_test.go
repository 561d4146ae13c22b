package report

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
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
	recs := csvRecords(t, rs)
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

	var b bytes.Buffer
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

// Auto and the fastbox row are each paired with every peer round by
// round; the best peer is the one each beats least, and WritePeers prints
// both comparisons. Peers and the other backends get none.
func TestAutoAndFastboxComparedWithPeers(t *testing.T) {
	far := machine.Placement{Class: "far", LatencyUs: 0.2}
	// row is a row of two rounds whose messages took perMsg seconds.
	row := func(backend string, perMsg float64) Result {
		var ss []harness.Sample
		for round := range 2 {
			ss = append(ss, harness.Sample{Size: 8, Iterations: 1000, Messages: 2000, Seconds: 2000 * perMsg,
				Before: far, After: far, Round: round})
		}
		return Aggregate("pingpong", backend, false, ss)
	}
	peer := func(name string, perMsg float64) Result {
		r := row(name, perMsg)
		r.Peer = &PeerInfo{Stack: name, Tool: "ucx_perftest", Package: "ucx-utils", Command: name + " -s 8"}
		return r
	}
	rs := []Result{row(Auto, 1e-6), row(Fastbox, 0.5e-6), row("cma", 0.4e-6), peer("ucx-posix", 0.8e-6), peer("ofi-shm", 2e-6)}
	CompareWithPeers(rs)
	for _, tc := range []struct {
		i     int
		ratio float64
	}{{0, 0.8}, {1, 1.6}} {
		r := rs[tc.i]
		if r.VsPeers == nil || len(r.VsPeers.Peers) != 2 {
			t.Fatalf("%s: VsPeers %+v", r.Backend, r.VsPeers)
		}
		c := r.VsPeers.ByClass[slices.Index(Classes, "far")]
		if c.Best != "ucx-posix" || c.Rounds != 2 || c.Ratio == nil || math.Abs(*c.Ratio-tc.ratio) > 1e-9 {
			t.Errorf("%s in far: %+v, want %.2f vs ucx-posix over 2 rounds", r.Backend, c, tc.ratio)
		}
	}
	for _, r := range rs[2:] {
		if r.VsPeers != nil {
			t.Errorf("%s compared with the peers", r.Backend)
		}
	}
	var b bytes.Buffer
	if err := WritePeers(&b, rs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"auto ÷ best peer: ",
		"fastbox (eager: Nemesis cells and fastboxes, no LMT) ÷ best peer, where a message fits a fastbox; >1: the fastbox is faster\n",
		"0.80 vs ucx-posix (2 rounds)",
		"1.60 vs ucx-posix (2 rounds)",
		"  ucx-posix (ucx_perftest, 8): ucx-posix -s 8\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
