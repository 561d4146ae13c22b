package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/peers"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
)

// TestPeersEveryInstalledPeerGivesARow runs lmtbench peers with tiny
// samples and checks that every installed peer produced a parsed row in
// each of its shapes and sizes, beside auto's. make test installs every
// peer (mk/peers.mk), so there nothing is left out.
func TestPeersEveryInstalledPeerGivesARow(t *testing.T) {
	var installed []*peers.Peer
	var missing []string
	for _, p := range peers.All() {
		if err := p.Missing(); err != nil {
			missing = append(missing, err.Error())
			continue
		}
		installed = append(installed, p)
	}
	if len(installed) == 0 {
		t.Skipf("lacks peer-stack: no peer stack installed (make deps installs them): %s", strings.Join(missing, "; "))
	}
	for _, m := range missing {
		t.Logf("not measured here: %s", m)
	}
	dir := t.TempDir()
	r := run(t, "peers", "--sizes", "8,64K", "--samples", "1", "--time", "2ms", "--placement-probe", "none", "--copies=false", "--json", "--report", dir)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var results []report.Result
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, r.stdout)
	}
	row := func(backend, shape string, size int) *report.Result {
		for i := range results {
			if x := &results[i]; x.Backend == backend && x.Mode == shape && x.Size == size {
				return x
			}
		}
		return nil
	}
	for _, shape := range []string{peers.PingPong, peers.NetPIPE, peers.Stream} {
		for _, size := range []int{8, 64 << 10} {
			a := row("auto", shape, size)
			if a == nil || a.Peer != nil || a.BytesPerSec <= 0 {
				t.Errorf("%s %d: auto row %+v", shape, size, a)
			}
			n := 0
			for _, p := range installed {
				if !p.Measures(shape) {
					continue
				}
				n++
				x := row(p.Name, shape, size)
				if x == nil {
					t.Errorf("%s %s %d: no row", p.Name, shape, size)
					continue
				}
				if x.Peer == nil || x.Peer.Stack != p.Stack || x.Peer.Package != p.Package || !strings.Contains(x.Peer.Command, p.Programs[0]) {
					t.Errorf("%s %s %d: peer %+v", p.Name, shape, size, x.Peer)
				}
				if x.BytesPerSec <= 0 || x.Messages != x.Iterations*peers.MessagesPerIteration(shape) || x.Samples != 1 {
					t.Errorf("%s %s %d: %+v", p.Name, shape, size, x)
				}
			}
			if n > 0 && (a == nil || a.VsPeers == nil || len(a.VsPeers.Peers) != n) {
				t.Errorf("%s %d: auto has no comparison with the %d peers: %+v", shape, size, n, a)
			}
			// The fastbox row runs where a message fits a fastbox only.
			switch e := row(report.Fastbox, shape, size); {
			case size > nemesis.DefaultFastboxPayload && e != nil:
				t.Errorf("%s %d: a fastbox row for a message no fastbox holds: %+v", shape, size, e)
			case size <= nemesis.DefaultFastboxPayload && (e == nil || e.BytesPerSec <= 0 || e.VsPeers == nil || len(e.VsPeers.Peers) != n):
				t.Errorf("%s %d: fastbox row %+v, want one compared with the %d peers", shape, size, e, n)
			}
		}
	}
	// The report draws every peer's line, dashed as a peer, beside auto's.
	figures, _ := renderReport(t, dir)
	for _, shape := range []string{peers.PingPong, peers.NetPIPE, peers.Stream} {
		want := map[string]string{"auto": "auto"}
		for _, p := range installed {
			if p.Measures(shape) {
				want[p.Name] = "peer"
			}
		}
		checkFigures(t, figures, shape, 2, want)
	}
}

// TestPeersFiledInAutosPlacement gives lmtbench peers a placement probe
// that always answers the same: one regime, which the run files as "all".
// The peer's readings are filed by the regimes of the whole run, like
// auto's, so auto and the fastbox row are compared with it in "all" in
// both rounds (a peer keeping the probe's own "near" would be compared
// in no class).
func TestPeersFiledInAutosPlacement(t *testing.T) {
	if _, err := exec.LookPath("ucx_perftest"); err != nil {
		t.Skip("lacks ucx-perftest: ucx_perftest not installed (apt-get install ucx-utils; make deps installs it)")
	}
	probe := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(probe, []byte("#!/bin/sh\necho near 0.05\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, "peers", "--peers", "ucx-posix", "--shapes", "pingpong", "--sizes", "8", "--samples", "2",
		"--time", "2ms", "--placement-probe", probe, "--copies=false", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var results []report.Result
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil {
		t.Fatalf("not a JSON array: %v\n%s", err, r.stdout)
	}
	if len(results) != 3 {
		t.Fatalf("%d rows, want auto, %s and ucx-posix: %+v", len(results), report.Fastbox, results)
	}
	for _, x := range results {
		if x.Placement != machine.All || x.SamplesKept != 2 {
			t.Errorf("%s: placement %s %d/%d, want %s 2/2", x.Backend, x.Placement, x.SamplesKept, x.Samples, machine.All)
		}
		if x.Peer != nil {
			continue
		}
		if x.VsPeers == nil {
			t.Errorf("%s: not compared with the peer", x.Backend)
			continue
		}
		c := x.VsPeers.ByClass[0]
		if c.Placement != machine.All || c.Best != "ucx-posix" || c.Rounds != 2 || c.Ratio == nil || *c.Ratio <= 0 {
			t.Errorf("%s vs peers in %s: %+v, want ucx-posix over 2 rounds", x.Backend, machine.All, c)
		}
	}
}

// TestPeersNotInstalledNamesThePackage hides every peer program but
// ucx_perftest from PATH: the table has UCX's rows and names the package
// of each other peer.
func TestPeersNotInstalledNamesThePackage(t *testing.T) {
	ucx, err := exec.LookPath("ucx_perftest")
	if err != nil {
		t.Skip("lacks ucx-perftest: ucx_perftest not installed (apt-get install ucx-utils; make deps installs it)")
	}
	dir := t.TempDir()
	if err := os.Symlink(ucx, filepath.Join(dir, "ucx_perftest")); err != nil {
		t.Fatal(err)
	}
	r := runEnv(t, []string{"PATH=" + dir}, "peers", "--sizes", "4K", "--samples", "1", "--time", "2ms", "--placement-probe", "none", "--shapes", "pingpong")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"4K    ucx-posix  UCX, UCX_TLS=posix",
		"4K    ucx-sm ",
		"UCX_TLS=posix ucx_perftest -p ",
		"not installed: ompi: mpirun.openmpi not installed — apt-get install netpipe-openmpi\n",
		"not installed: mpich-posix: mpiexec.mpich not installed — apt-get install netpipe-mpich2\n",
		"not installed: ofi-shm: fi_pingpong not installed — apt-get install libfabric-bin\n",
		"not packaged by Debian 12: OSU micro-benchmarks",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "peer failed") {
		t.Errorf("a peer failed:\n%s", r.stdout)
	}
	// Naming a peer that is not installed is an error with the package.
	r = runEnv(t, []string{"PATH=" + dir}, "peers", "--peers", "ofi-shm", "--sizes", "4K")
	if r.code != 1 || r.stderr != "lmtbench: --peers: ofi-shm: fi_pingpong not installed — apt-get install libfabric-bin\n" {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestPeersBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"peers", "--shapes", "bidir"}, `lmtbench: --shapes: unknown shape "bidir" (shapes: pingpong, netpipe, stream)`},
		{[]string{"peers", "--peers", "lam"}, `lmtbench: --peers: unknown peer "lam" (peers: ompi, ompi-copy, mpich, mpich-posix, ucx-posix, ucx-sysv, ucx-sm, ofi-shm)`},
		{[]string{"peers", "--cpus", "same"}, "lmtbench: peers: --cpus same puts both processes on CPU "},
	} {
		r := run(t, tc.args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("lmtbench %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
	}
}
