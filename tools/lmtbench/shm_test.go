package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
)

// TestInfoSaysSharedMemory: info gives the nemesis segment's size for a
// node-filling job, as nemesis.SegmentSize computes it, and /dev/shm's
// free space.
func TestInfoSaysSharedMemory(t *testing.T) {
	r := run(t, "info", "--placement-probe", "none")
	size, err := nemesis.SegmentSize(192, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("192 ranks %.1f MiB", float64(size)/(1<<20))
	if r.code != 0 || !strings.Contains(r.stdout, "shm:       nemesis segment") || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "/dev/shm ") {
		t.Fatalf("info: exit %d, want a shm line with %q and /dev/shm's free space:\n%s%s", r.code, want, r.stdout, r.stderr)
	}
}
