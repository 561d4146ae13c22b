package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestTypedModes runs lmtbench vector and indexed as a user would, at
// tiny shapes (eager and by the LMT): each shape gets a typed and a pack
// row with the shape's payload as size (the ranks check every block that
// comes back), and the typed row's ratio is its throughput over the pack
// row's of the same size. No speed is asserted.
func TestTypedModes(t *testing.T) {
	cases := []struct {
		args  []string
		sizes []int
	}{
		// 8 KiB eager; 4 × 64 KiB = 256 KiB by the LMT.
		{[]string{"vector", "--vectors", "1Kx8/16,4x64K/128K"}, []int{8 << 10, 256 << 10}},
		// 5 blocks: 3 of 64 B, 2 of 16 KiB.
		{[]string{"indexed", "--blocks", "5", "--small", "64", "--large", "16K"}, []int{3*64 + 2*16<<10}},
	}
	for _, c := range cases {
		t.Run(c.args[0], func(t *testing.T) {
			r := run(t, append(c.args, "--iters", "3", "--samples", "2", "--cpus", "none", "--json")...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			var rows []struct {
				Mode        string   `json:"mode"`
				Backend     string   `json:"backend"`
				Size        int      `json:"size"`
				Samples     int      `json:"samples"`
				BytesPerSec float64  `json:"bytes_per_sec"`
				LatencyUs   float64  `json:"latency_us"`
				TypedVsPack *float64 `json:"typed_vs_pack"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
				t.Fatalf("%v in:\n%s", err, r.stdout)
			}
			if len(rows) != 2*len(c.sizes) {
				t.Fatalf("%d rows, want typed and pack at each of %v:\n%s", len(rows), c.sizes, r.stdout)
			}
			for i, size := range c.sizes {
				typed, pack := rows[2*i], rows[2*i+1]
				if typed.Mode != c.args[0] || pack.Mode != c.args[0] || typed.Backend != "typed" || pack.Backend != "pack" || typed.Size != size || pack.Size != size {
					t.Fatalf("rows %d and %d: %+v, %+v; want typed then pack of %s at %d bytes", 2*i, 2*i+1, typed, pack, c.args[0], size)
				}
				for _, row := range []struct {
					name      string
					samples   int
					bps, latU float64
				}{{"typed", typed.Samples, typed.BytesPerSec, typed.LatencyUs}, {"pack", pack.Samples, pack.BytesPerSec, pack.LatencyUs}} {
					if row.samples != 2 || row.bps <= 0 || row.latU <= 0 {
						t.Fatalf("%s row at %d bytes: %d samples, %v B/s, %v µs; want 2 samples and positive figures", row.name, size, row.samples, row.bps, row.latU)
					}
				}
				if typed.TypedVsPack == nil || pack.TypedVsPack != nil {
					t.Fatalf("%d bytes: typed_vs_pack %v on typed, %v on pack; want it on the typed row only", size, typed.TypedVsPack, pack.TypedVsPack)
				}
				if want := typed.BytesPerSec / pack.BytesPerSec; math.Abs(*typed.TypedVsPack-want) > 1e-9*want {
					t.Fatalf("%d bytes: typed_vs_pack %v, want typed ÷ pack = %v", size, *typed.TypedVsPack, want)
				}
			}
		})
	}
}

// TestTypedTableShowsBothSides: the table prints each row and the ratio
// line with both throughputs and the paper it follows.
func TestTypedTableShowsBothSides(t *testing.T) {
	r := run(t, "indexed", "--blocks", "3", "--large", "8K", "--iters", "2", "--samples", "1", "--cpus", "none")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"Aumage, Brunet, Furmento, Namyst, CAC 2007", " typed ", " pack ", "typed ÷ pack  ", " GB/s ÷ ", "(latency "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q in:\n%s", want, r.stdout)
		}
	}
}

func TestTypedBadShapes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"vector", "--vectors", "8x16"}, `lmtbench: --vectors "8x16": want COUNTxBLOCK/STRIDE entries`},
		{[]string{"vector", "--vectors", "4x8/4"}, "lmtbench: vector of 4 blocks of 8, stride 4: datatype: invalid description: vector stride = 4"},
		{[]string{"vector", "--vectors", "4x8/16,2x16/16"}, "both carry 32 bytes"},
		{[]string{"indexed", "--blocks", "0"}, "lmtbench: --blocks 0: want 1 or more"},
		{[]string{"indexed", "--large", "0"}, `lmtbench: --large "0": want a block size of 1 byte or more`},
	} {
		r := run(t, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
