package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// A row measured under a launcher names its path, provider and partner in
// every output; a row of a local run leaves the three empty.
func TestPathInEveryOutput(t *testing.T) {
	rs := []Result{
		{Mode: "pingpong", Backend: Auto, Size: 8, BytesPerSec: 1e6, LatencyUs: 8, Samples: 1, SamplesKept: 1, Placement: "unknown",
			Path: "net ofi tcp;ofi_rxm", Provider: "ofi tcp;ofi_rxm", Partner: 2},
		{Mode: "pingpong", Backend: Auto, Size: 64, BytesPerSec: 1e7, LatencyUs: 6.4, Samples: 1, SamplesKept: 1, Placement: "far"},
	}
	recs := csvRecords(t, rs)
	n := slices.Index(recs[0], "path")
	if n < 0 || strings.Join(recs[0][n:n+3], ",") != "path,provider,partner" {
		t.Fatalf("CSV columns %q, want path,provider,partner together", recs[0])
	}
	if got := recs[1][n : n+3]; got[0] != "net ofi tcp;ofi_rxm" || got[1] != "ofi tcp;ofi_rxm" || got[2] != "2" {
		t.Errorf("launcher row: %q", got)
	}
	if got := strings.Join(recs[2][n:n+3], ""); got != "" {
		t.Errorf("local row: path, provider, partner %q; want empty", got)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, rs); err != nil {
		t.Fatal(err)
	}
	if js := b.String(); strings.Count(js, `"path": "net ofi tcp;ofi_rxm"`) != 1 || strings.Count(js, `"path"`) != 1 || !strings.Contains(js, `"partner": 2`) {
		t.Errorf("JSON: want one path, on the launcher row only:\n%s", js)
	}
	b.Reset()
	if err := WriteTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "auto [rank 2, net ofi tcp;ofi_rxm]") {
		t.Errorf("table without the path in the backend cell:\n%s", b.String())
	}
}
