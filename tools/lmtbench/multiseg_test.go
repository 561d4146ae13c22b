package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestMultiseg runs lmtbench multiseg as a user would: every variant runs
// at every shape (the ranks check the segments they receive, Open MPI's
// included), and each aggregating variant gets its ratios to the
// straightforward strategy and to Open MPI.
func TestMultiseg(t *testing.T) {
	if _, err := exec.LookPath("mpicc.openmpi"); err != nil {
		t.Skip("lacks openmpi: needs Open MPI's mpicc.openmpi (openmpi-bin, libopenmpi-dev: installed by make test, mk/peers.mk)")
	}
	r := run(t, "multiseg", "--segs", "1,16", "--sizes", "8,512", "--iters", "20", "--samples", "1", "--cpus", "none")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, shape := range []string{"1×8 B", "16×8 B", "16×512 B"} {
		for _, v := range []string{"straightforward", "aggregate", "aggregate+batch", "openmpi"} {
			row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(shape) + ` +` + regexp.QuoteMeta(v) + ` +[0-9.]+[µnm]?s +1$`)
			if !row.MatchString(r.stdout) {
				t.Errorf("no row for %s %s in:\n%s", shape, v, r.stdout)
			}
		}
		for _, ratio := range []string{"straightforward / aggregate = ", "openmpi / aggregate = ", "straightforward / aggregate+batch = ", "openmpi / aggregate+batch = "} {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(shape) + ` +` + regexp.QuoteMeta(ratio) + `[0-9.]+ \(`).MatchString(r.stdout) {
				t.Errorf("no ratio %q for %s in:\n%s", ratio, shape, r.stdout)
			}
		}
	}
	if strings.Contains(r.stdout, "1×512 B") {
		t.Errorf("one segment is the plain ping-pong at the smallest size only:\n%s", r.stdout)
	}
}

func TestMultisegBadSegs(t *testing.T) {
	r := run(t, "multiseg", "--segs", "0")
	if r.code != 2 || !strings.Contains(r.stderr, `lmtbench: --segs "0": want a comma list of segment counts 1..1024`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}
