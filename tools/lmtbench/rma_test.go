package main

import (
	"encoding/csv"
	"slices"
	"strings"
	"testing"
)

// TestPutGetCommands: `lmtbench put` and `lmtbench get` measure every
// one-sided mechanism that works here in RWAPI's three shapes, one CSV
// table per shape, each engine's data verified byte by byte first.
func TestPutGetCommands(t *testing.T) {
	for _, op := range []string{"put", "get"} {
		r := run(t, append([]string{op, "--sizes", "4K", "--csv"}, fast...)...)
		if r.code != 0 {
			t.Fatalf("lmtbench %s: exit %d: %s", op, r.code, r.stderr)
		}
		rows, err := csv.NewReader(strings.NewReader(strings.ReplaceAll(r.stdout, "\n\n", "\n"))).ReadAll()
		if err != nil {
			t.Fatalf("lmtbench %s --csv does not parse: %v\n%s", op, err, r.stdout)
		}
		var got []string
		for _, row := range rows {
			if !slices.Contains(row, "backend") {
				got = append(got, strings.Join(row[:3], " "))
			}
		}
		t.Logf("lmtbench %s: %q", op, got)
		for _, shape := range []string{"pingpong", "bidir", "stream"} {
			for _, m := range []string{"allocated", "cma", "am"} {
				want := op + "-" + m
				if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, shape) && strings.Contains(s, want) }) {
					t.Errorf("lmtbench %s: no %s row for %s in %q", op, shape, want, got)
				}
			}
		}
	}
}
