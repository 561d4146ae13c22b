package peers

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/exitwait"
)

// A sample killed at its deadline leaves nothing in /dev/shm: Open MPI's
// vader segments, which a SIGKILLed job used to leave there, live in the
// sample's own directory, removed with it, and its ranks are gone.
func TestKilledSampleLeavesNothingInDevShm(t *testing.T) {
	p := peer(t, "ompi-copy")
	if err := p.Missing(); err != nil {
		t.Skipf("lacks netpipe-openmpi: %v (make deps installs it)", err)
	}
	// Far more iterations than fit in the deadline, which still leaves
	// mpirun time to start both ranks and map their segments.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, inv, err := p.Run(ctx, Job{Shape: NetPIPE, Size: 4 << 20, Iters: 1_000_000, Root: os.Geteuid() == 0})
	if err == nil || !strings.Contains(err.Error(), "ran past its deadline") {
		t.Fatalf("Run: %v, want the sample killed at its deadline", err)
	}
	const flag = "--mca btl_vader_backing_directory "
	cmd := inv.String()
	i := strings.Index(cmd, flag+"/dev/shm/lmtbench-peer-")
	if i < 0 {
		t.Fatalf("command does not place vader's segments: %s", cmd)
	}
	// This sample's own directory, not any lmtbench-peer-* one: the
	// packages of go test run in parallel, and another one's peers may
	// be running now.
	dir, _, _ := strings.Cut(cmd[i+len(flag):], " ")
	// mpirun's orted may outlive the group's SIGKILL by a moment, longer
	// on a loaded machine: wait for each rank still there to exit (a rank
	// that was never killed keeps this test waiting until go test's
	// -timeout names it).
	ranks, _ := exec.Command("pgrep", "-f", "NPopenmpi -l 4194304 -u 4194304 -p 0 -n 1000000").Output()
	for _, f := range strings.Fields(string(ranks)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pgrep printed %q", ranks)
		}
		if err := exitwait.Wait(pid); err != nil {
			t.Errorf("rank pid %d: %v", pid, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		left, _ := os.ReadDir(dir)
		t.Errorf("%s left behind (%d entries; stat: %v)", dir, len(left), err)
	}
}
