package collbench

import (
	"strings"
	"testing"
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
