package launch_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"golang.org/x/sys/unix"
)

// The helper-process modes below are chosen by environment so that one test
// binary can play every role.
const envMode = "LAUNCH_TEST_MODE"

// envSurvivors names the directory where rank1fails's other ranks leave
// their pids.
const envSurvivors = "LAUNCH_TEST_SURVIVORS"

func TestMain(m *testing.M) {
	if p, ok := launch.Self(); ok && os.Getenv(envMode) != "" {
		os.Exit(helper(p, os.Getenv(envMode)))
	}
	os.Exit(m.Run())
}

func helper(p launch.Proc, mode string) int {
	switch mode {
	case "ok":
		return 0
	case "rank1fails":
		if p.Rank == 1 {
			return 3
		}
		// Leave this rank's pid where the test finds it, then wait
		// for ever: only Run's kill ends it.
		// Written under another name and renamed, so that a rank killed
		// between creating the file and writing its pid leaves no file
		// rather than an empty one.
		name := filepath.Join(os.Getenv(envSurvivors), fmt.Sprint(p.Rank))
		if err := os.WriteFile(name+".tmp", []byte(fmt.Sprint(os.Getpid())), 0o600); err != nil {
			return 4
		}
		if err := os.Rename(name+".tmp", name); err != nil {
			return 4
		}
		for {
			time.Sleep(time.Hour)
		}
	case "hang":
		time.Sleep(time.Minute)
	case "litter", "litter-die":
		// Leave a FIFO and a file in the job's directory, as a rank
		// killed mid-rendezvous does.
		dir := launch.JobDir(p.Job)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return 4
		}
		if err := unix.Mkfifo(filepath.Join(dir, fmt.Sprintf("fifo-%d", p.Rank)), 0o600); err != nil {
			return 5
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%d", p.Rank)), nil, 0o600); err != nil {
			return 6
		}
		if mode == "litter" {
			return 0
		}
		if p.Rank == 1 {
			unix.Kill(os.Getpid(), unix.SIGKILL)
		}
		time.Sleep(time.Minute) // killed by the launcher
	}
	return 9
}

// TestRunRemovesJobDir: whatever ranks leave in the job's directory is gone
// when Run returns, whether the job succeeded or a rank was killed.
func TestRunRemovesJobDir(t *testing.T) {
	for _, mode := range []string{"litter", "litter-die"} {
		job := launch.NewJobName()
		err := launch.Run(context.Background(), launch.Options{Procs: 2, Job: job, Env: []string{envMode + "=" + mode}, Timeout: time.Minute})
		var le *launch.Error
		switch {
		case mode == "litter" && err != nil:
			t.Fatalf("%s: Run = %v", mode, err)
		case mode == "litter-die" && (!errors.As(err, &le) || le.Rank != 1 || le.Reason != "signal: killed"):
			t.Fatalf("%s: Run = %v, want rank 1 killed", mode, err)
		}
		if ents, err := os.ReadDir(launch.JobDir(job)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %s after the job: %v, %v; want it removed", mode, launch.JobDir(job), names(ents), err)
		}
	}
}

func names(ents []os.DirEntry) []string {
	var s []string
	for _, e := range ents {
		s = append(s, e.Name())
	}
	return s
}

func TestRunRejectsBadJobName(t *testing.T) {
	for _, job := range []string{"../etc", "a/b", ".", "..", "nul\x00"} {
		err := launch.Run(context.Background(), launch.Options{Procs: 1, Job: job, Env: []string{envMode + "=ok"}})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", job)) {
			t.Errorf("Run(Job=%q) = %v, want an error naming the job", job, err)
		}
	}
}

func TestRunAllSucceed(t *testing.T) {
	err := launch.Run(context.Background(), launch.Options{Procs: 3, Env: []string{envMode + "=ok"}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunNamesFailingRankAndKillsOthers: ranks 0 and 2 would wait for
// ever, and the job has no timeout, so Run returns only by killing them
// once rank 1 fails; it blames rank 1, and both pids are gone.
func TestRunNamesFailingRankAndKillsOthers(t *testing.T) {
	dir := t.TempDir()
	err := launch.Run(context.Background(), launch.Options{Procs: 3,
		Env: []string{envMode + "=rank1fails", envSurvivors + "=" + dir}})
	var le *launch.Error
	if !errors.As(err, &le) {
		t.Fatalf("Run = %v, want *launch.Error", err)
	}
	if le.Rank != 1 || le.Reason != "exit status 3" {
		t.Fatalf("Run blamed rank %d (%s), want rank 1 (exit status 3)", le.Rank, le.Reason)
	}
	for _, r := range []int{0, 2} {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(r)))
		if err != nil {
			continue // killed before it wrote its pid
		}
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err != nil {
			t.Fatalf("rank %d's pid file %q: %v", r, b, err)
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			t.Errorf("rank %d (pid %d) after Run returned: kill(pid, 0) = %v, want ESRCH", r, pid, err)
		}
	}
}

func TestRunTimeout(t *testing.T) {
	err := launch.Run(context.Background(), launch.Options{Procs: 2, Env: []string{envMode + "=hang"}, Timeout: 300 * time.Millisecond})
	if !errors.Is(err, launch.ErrTimeout) {
		t.Fatalf("Run = %v, want ErrTimeout", err)
	}
	if !strings.Contains(err.Error(), "timeout after 300ms") {
		t.Fatalf("error %q does not say how long it waited", err)
	}
}

func TestRunRejectsBadSize(t *testing.T) {
	for _, n := range []int{0, -1, launch.MaxProcs + 1} {
		err := launch.Run(context.Background(), launch.Options{Procs: n})
		if err == nil || !strings.Contains(err.Error(), "processes requested") {
			t.Errorf("Run(Procs=%d) = %v, want a size error", n, err)
		}
	}
}

func TestLaunchtestRanksSeeTheirPlace(t *testing.T) {
	launchtest.Run(t, 4, func(p launch.Proc) error {
		if p.Size != 4 || p.Rank < 0 || p.Rank >= 4 || p.Job == "" {
			return errors.New("bad place in job")
		}
		return nil
	})
}
