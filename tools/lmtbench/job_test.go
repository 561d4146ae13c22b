//go:build ofi && pmix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// jobRow is what TestAcrossNodes reads of a --json row.
type jobRow struct {
	Mode        string  `json:"mode"`
	Backend     string  `json:"backend"`
	Size        int     `json:"size"`
	Iterations  int     `json:"iterations"`
	Messages    int     `json:"messages"`
	Seconds     float64 `json:"seconds"`
	BytesPerSec float64 `json:"bytes_per_sec"`
	LatencyUs   float64 `json:"latency_us"`
	Path        string  `json:"path"`
	Provider    string  `json:"provider"`
	Partner     int     `json:"partner"`
}

// TestAcrossNodes builds the multi-node lmtbench and runs it under Open
// MPI's mpirun, three ranks on two simulated nodes (0,0,1): by default
// rank 0 measures with rank 2, over the network module, and with --peer 1
// over the node's segment; rank 1, then rank 2, sits it out. Each row
// must name its path and partner and carry the exact counts asked for.
func TestAcrossNodes(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("lacks mpirun: mpirun (Debian package openmpi-bin) is not installed: no PMIx launcher to run lmtbench under")
	}
	bin := filepath.Join(t.TempDir(), "lmtbench")
	if out, err := exec.Command("go", "build", "-tags", "ofi pmix", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags \"ofi pmix\": %v\n%s", err, out)
	}
	const iters = 50
	for _, k := range []struct {
		mode     string
		peer     []string
		path     string
		provider string
		partner  int
		messages int
	}{
		{"pingpong", nil, "net ofi tcp;ofi_rxm", "ofi tcp;ofi_rxm", 2, 2 * iters},
		{"pingpong", []string{"--peer", "1"}, "shm", "", 1, 2 * iters},
		{"stream", nil, "net ofi tcp;ofi_rxm", "ofi tcp;ofi_rxm", 2, iters},
	} {
		args := []string{"--oversubscribe", "-np", "3", "-x", "KNEMESIS_NODE_MAP=0,0,1"}
		if os.Geteuid() == 0 {
			args = append(args, "--allow-run-as-root")
		}
		args = append(args, bin, k.mode, "--sizes", "8,64K", "--iters", fmt.Sprint(iters), "--samples", "1", "--node", "127.0.0.1", "--json")
		args = append(args, k.peer...)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var out, errOut bytes.Buffer
		cmd := exec.CommandContext(ctx, mpirun, args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("mpirun %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		var rows []jobRow
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
			t.Fatalf("%s %v: stdout is not one JSON array (only rank 0 writes): %v\n%s", k.mode, k.peer, err, out.String())
		}
		if len(rows) != 2 || rows[0].Size != 8 || rows[1].Size != 64<<10 {
			t.Fatalf("%s %v: want rows for 8 and 64K, got %+v", k.mode, k.peer, rows)
		}
		for _, r := range rows {
			if r.Mode != k.mode || r.Backend != "auto" || r.Path != k.path || r.Provider != k.provider || r.Partner != k.partner {
				t.Errorf("%s %v, %d B: mode %q backend %q path %q provider %q partner %d; want %s auto %q %q %d",
					k.mode, k.peer, r.Size, r.Mode, r.Backend, r.Path, r.Provider, r.Partner, k.mode, k.path, k.provider, k.partner)
			}
			if r.Iterations != iters || r.Messages != k.messages || !(r.Seconds > 0) || !(r.LatencyUs > 0) || !(r.BytesPerSec > 0) {
				t.Errorf("%s %v, %d B: %d iterations, %d messages, %g s, %g µs, %g B/s; want %d, %d and positive figures",
					k.mode, k.peer, r.Size, r.Iterations, r.Messages, r.Seconds, r.LatencyUs, r.BytesPerSec, iters, k.messages)
			}
		}
	}
}
