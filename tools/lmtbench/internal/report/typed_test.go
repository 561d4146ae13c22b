package report

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strings"
	"testing"
)

// CompareTyped puts typed ÷ pack on the typed row of each size, and every
// output shows it: the CSV column on the typed row only, the table's line
// with both throughputs.
func TestCompareTyped(t *testing.T) {
	rs := []Result{
		{Mode: "indexed", Backend: TypedRow, Size: 1000, BytesPerSec: 3e9, LatencyUs: 2, Samples: 1, SamplesKept: 1, Placement: "unknown"},
		{Mode: "indexed", Backend: PackRow, Size: 1000, BytesPerSec: 2e9, LatencyUs: 3, Samples: 1, SamplesKept: 1, Placement: "unknown"},
		{Mode: "indexed", Backend: TypedRow, Size: 2000, BytesPerSec: 1e9, LatencyUs: 2, Samples: 1, SamplesKept: 1, Placement: "unknown"},
	}
	CompareTyped(rs)
	if rs[0].TypedVsPack == nil || *rs[0].TypedVsPack != 1.5 || rs[1].TypedVsPack != nil || rs[2].TypedVsPack != nil {
		t.Fatalf("ratios %v %v %v: want 1.5 on the typed row with a pack row only", rs[0].TypedVsPack, rs[1].TypedVsPack, rs[2].TypedVsPack)
	}
	recs := csvRecords(t, rs)
	i := slices.Index(recs[0], "typed_vs_pack")
	if i < 0 || recs[1][i] != "1.5" || recs[2][i] != "" || recs[3][i] != "" {
		t.Fatalf("CSV typed_vs_pack column %d: %q", i, recs)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "typed ÷ pack  3.00 GB/s ÷ 2.00 GB/s  = 1.50  (latency 2.00 µs vs 3.00 µs)") {
		t.Errorf("table without the ratio line:\n%s", b.String())
	}
}

// csvRecords writes rs as CSV and reads the records back.
func csvRecords(t *testing.T, rs []Result) [][]string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteCSV(&b, rs); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}
