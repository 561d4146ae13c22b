package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/shm"
)

// TestInfoSaysSharedMemory: info gives the shared memory of a node-filling
// job, as nemesis.SegmentSize and shm.FootprintOf compute it (the segment,
// and the shm LMT's rings and pools with every pair using them), and
// /dev/shm's free space.
func TestInfoSaysSharedMemory(t *testing.T) {
	r := run(t, "info", "--placement-probe", "none")
	seg, err := nemesis.SegmentSize(192, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := shm.FootprintOf(lmt.Config{})
	pools := 192 * f.Pool
	want := fmt.Sprintf("192 ranks: %.1f MiB = %.1f segment + %.1f rings + %.1f pools",
		float64(seg+f.Job(192))/(1<<20), float64(seg)/(1<<20), float64(f.Job(192)-pools)/(1<<20), float64(pools)/(1<<20))
	if r.code != 0 || !strings.Contains(r.stdout, "shm:       default geometry") || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "/dev/shm ") {
		t.Fatalf("info: exit %d, want a shm line with %q and /dev/shm's free space:\n%s%s", r.code, want, r.stdout, r.stderr)
	}
}
