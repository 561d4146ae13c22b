package collbench

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCompare(t *testing.T) {
	rows := []Row{
		{Variant: Knemesis, Latency: 2, Rounds: 3},
		{Variant: "openmpi", Latency: 3, Rounds: 3},
		{Variant: "mpich", Latency: 5, Rounds: 3},
		{Variant: "openmpi-sm", Rounds: 0, Skipped: "not built"},
	}
	compare(rows)
	vs := rows[0].VsPeers
	if vs == nil || vs.Best != "openmpi" || vs.Ratio != 1.5 || vs.Ratios["mpich"] != 2.5 || len(vs.Ratios) != 2 {
		t.Fatalf("VsPeers %+v, want best openmpi at 1.5, mpich 2.5, the skipped peer left out", vs)
	}
	var b strings.Builder
	Print(&b, rows)
	if !strings.Contains(b.String(), "1.50 (openmpi)") || !strings.Contains(b.String(), "(not built)") {
		t.Fatalf("table:\n%s", b.String())
	}
}

func TestParseResult(t *testing.T) {
	if r, err := parseResult([]byte("{\"Nanos\":3000,\"Iters\":3}\n")); err != nil || r.Latency() != 1000 {
		t.Fatalf("%+v, %v", r, err)
	}
	for _, bad := range []string{"", "{\"Nanos\":0,\"Iters\":3}", "{\"Nanos\":5,\"Iters\":0}"} {
		if _, err := parseResult([]byte(bad)); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

func TestParseOps(t *testing.T) {
	if ops, err := ParseOps(""); err != nil || !slices.Equal(ops, Ops) {
		t.Fatalf("default: %v, %v; want %v", ops, err, Ops)
	}
	if ops, err := ParseOps("is,alltoall"); err != nil || !slices.Equal(ops, []string{IS, Alltoall}) {
		t.Fatalf("is,alltoall: %v, %v", ops, err)
	}
	for list, want := range map[string]string{
		"bcast,scan": `--backends "bcast,scan": "scan" is no operation of coll (barrier,bcast,allreduce,alltoall,is)`,
		"is,is":      `--backends "is,is": is named twice`,
		"bcast,":     `--backends "bcast,": "" is no operation of coll (barrier,bcast,allreduce,alltoall,is)`,
	} {
		if _, err := ParseOps(list); err == nil || err.Error() != want {
			t.Errorf("ParseOps(%q): %v, want %s", list, err, want)
		}
	}
}

func TestCheckProcs(t *testing.T) {
	for _, n := range []int{2, 8, MaxProcs} {
		if err := CheckProcs(n); err != nil {
			t.Errorf("%d ranks refused: %v", n, err)
		}
	}
	for _, n := range []int{-1, 0, 1, MaxProcs + 1} {
		want := fmt.Sprintf("--procs %d: coll runs 2 to 64 ranks", n)
		if err := CheckProcs(n); err == nil || err.Error() != want {
			t.Errorf("CheckProcs(%d): %v, want %s", n, err, want)
		}
	}
}

// TestRowsOf: one row per operation, size and variant, the barrier at one
// size only; a variant without samples is skipped with its compiler's
// reason; the median of three samples is the middle one.
func TestRowsOf(t *testing.T) {
	cfg := Config{Ops: []string{Barrier, Bcast, IS}, Sizes: []int{8, 4096, 1 << 20}, Procs: 3}
	variants := []string{Knemesis, "openmpi", "mpich"}
	samples := map[sampleKey][]time.Duration{}
	for _, op := range cfg.Ops {
		for _, size := range sizesFor(op, cfg.Sizes) {
			samples[sampleKey{op, size, Knemesis}] = []time.Duration{3000, 1000, 2000}
			samples[sampleKey{op, size, "openmpi"}] = []time.Duration{4000, 4000, 4000}
		}
	}
	rows := rowsOf(cfg, variants, samples, map[string]string{"mpicc.mpich": "mpicc.mpich not found"})
	if want := (1 + 3 + 3) * 3; len(rows) != want {
		t.Fatalf("%d rows, want %d (barrier once, bcast and is at 3 sizes, 3 variants each)", len(rows), want)
	}
	for i, r := range rows {
		if r.Procs != 3 || !r.Over {
			t.Errorf("row %d: %+v: want 3 ranks, oversubscribed (no CPUs)", i, r)
		}
		switch r.Variant {
		case Knemesis:
			if r.Latency != 2 || r.Rounds != 3 || r.VsPeers == nil || r.VsPeers.Ratio != 2 || r.VsPeers.Best != "openmpi" {
				t.Errorf("row %d: %+v vs %+v: want 2 µs over 3 rounds, 2× faster than openmpi", i, r, r.VsPeers)
			}
		case "mpich":
			if r.Rounds != 0 || r.Skipped != "mpicc.mpich not found" {
				t.Errorf("row %d: %+v: want skipped, saying why", i, r)
			}
		}
	}
	if rows[0].Op != Barrier || rows[0].Size != 0 || rows[3].Op != Bcast || rows[3].Size != 8 || rows[len(rows)-1].Op != IS || rows[len(rows)-1].Size != 1<<20 {
		t.Fatalf("order: %+v … %+v", rows[0], rows[len(rows)-1])
	}
}

func TestSameKeys(t *testing.T) {
	sums := map[string]checksum{}
	if err := sameKeys(sums, "is 4096 B", Knemesis, 0xabc); err != nil {
		t.Fatal(err)
	}
	if err := sameKeys(sums, "is 4096 B", "openmpi", 0xabc); err != nil {
		t.Fatal(err)
	}
	want := "is 4096 B: knemesis's keys checksum to 0xabc, mpich's to 0xabd: the two sides did not sort the same keys"
	if err := sameKeys(sums, "is 4096 B", "mpich", 0xabd); err == nil || err.Error() != want {
		t.Fatalf("%v, want %s", err, want)
	}
}

func TestParsePeers(t *testing.T) {
	if got, err := ParsePeers(""); err != nil || !slices.Equal(got, PeerNames()) || len(got) != 5 {
		t.Fatalf("default: %v, %v; want all five of %v", got, err, PeerNames())
	}
	if got, err := ParsePeers("none"); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("none: %#v, %v", got, err)
	}
	if got, err := ParsePeers("mpich,openmpi"); err != nil || !slices.Equal(got, []string{"mpich", "openmpi"}) {
		t.Fatalf("mpich,openmpi: %v, %v", got, err)
	}
	for list, want := range map[string]string{
		"openmpi,ucx":     `--peers "openmpi,ucx": "ucx" is no MPI row of coll (openmpi,openmpi-tuned,openmpi-han,openmpi-sm,mpich, or none)`,
		"openmpi,openmpi": `--peers "openmpi,openmpi": openmpi named twice`,
	} {
		if _, err := ParsePeers(list); err == nil || err.Error() != want {
			t.Errorf("ParsePeers(%q): %v, want %s", list, err, want)
		}
	}
}
