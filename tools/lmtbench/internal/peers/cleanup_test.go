package peers

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// A sample killed at its deadline leaves nothing in /dev/shm: Open MPI's
// vader segments, which a SIGKILLed job used to leave there, live in the
// sample's own directory, removed with it.
func TestKilledSampleLeavesNothingInDevShm(t *testing.T) {
	p := peer(t, "ompi-copy")
	if err := p.Missing(); err != nil {
		t.Skipf("%v (make deps installs it)", err)
	}
	before := shmEntries(t)
	// Far more iterations than fit in the deadline, which still leaves
	// mpirun time to start both ranks and map their segments.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, inv, err := p.Run(ctx, Job{Shape: NetPIPE, Size: 4 << 20, Iters: 1_000_000, Root: os.Geteuid() == 0})
	if err == nil || !strings.Contains(err.Error(), "ran past its deadline") {
		t.Fatalf("Run: %v, want the sample killed at its deadline", err)
	}
	if !strings.Contains(inv.String(), "--mca btl_vader_backing_directory /dev/shm/lmtbench-peer-") {
		t.Errorf("command does not place vader's segments: %s", inv)
	}
	// mpirun's orted may outlive the group's SIGKILL by a moment.
	time.Sleep(time.Second)
	if out, _ := exec.Command("pgrep", "-f", "NPopenmpi -l 4194304 -u 4194304 -p 0 -n 1000000").Output(); len(out) > 0 {
		t.Errorf("ranks still running: %s", out)
	}
	for _, e := range shmEntries(t) {
		if !slices.Contains(before, e) && (strings.HasPrefix(e, "vader_segment.") || strings.HasPrefix(e, "lmtbench-peer-")) {
			t.Errorf("/dev/shm/%s left behind", e)
		}
	}
}

func shmEntries(t *testing.T) []string {
	t.Helper()
	es, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
