package launch_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// The helper-process modes below are chosen by environment so that one test
// binary can play every role.
const envMode = "LAUNCH_TEST_MODE"

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
		time.Sleep(time.Minute) // must be killed when rank 1 fails
		return 0
	case "hang":
		time.Sleep(time.Minute)
	}
	return 9
}

func TestRunAllSucceed(t *testing.T) {
	err := launch.Run(context.Background(), launch.Options{Procs: 3, Env: []string{envMode + "=ok"}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRunNamesFailingRankAndKillsOthers(t *testing.T) {
	start := time.Now()
	err := launch.Run(context.Background(), launch.Options{Procs: 3, Env: []string{envMode + "=rank1fails"}, Timeout: time.Minute})
	var le *launch.Error
	if !errors.As(err, &le) {
		t.Fatalf("Run = %v, want *launch.Error", err)
	}
	if le.Rank != 1 || le.Reason != "exit status 3" {
		t.Fatalf("Run blamed rank %d (%s), want rank 1 (exit status 3)", le.Rank, le.Reason)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("surviving ranks were not killed: Run took %v", d)
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
