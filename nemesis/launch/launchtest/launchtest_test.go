package launchtest_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// envFixture turns a test below into the fixture it observes: a test whose
// job must fail. The test first runs without it, re-executes the test binary
// with it for that one test, and checks that the run failed, and why.
const envFixture = "LAUNCHTEST_FIXTURE"

func fixture() bool { return os.Getenv(envFixture) != "" }

// observeFailure runs this test again, as a fixture, in a fresh test
// binary process, and checks that it failed with every one of want in its
// output.
func observeFailure(t *testing.T, want ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envFixture+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("fixture run ended with %v, want exit status 1 (a failed test); output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- FAIL: "+t.Name()) {
		t.Fatalf("fixture run did not fail %s; output:\n%s", t.Name(), out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("fixture output lacks %q; output:\n%s", w, out)
		}
	}
}

func ok(launch.Proc) error { return nil }

// A rank that skips before launchtest.Run fails the test, with its skip
// message quoted.
func TestRankSkippingFailsParent(t *testing.T) {
	if !fixture() {
		observeFailure(t,
			"rank 1 never began the job's function in TestRankSkippingFailsParent",
			"the ranks' output shows: --- SKIP: TestRankSkippingFailsParent")
		return
	}
	if p, child := launch.Self(); child && p.Rank == 1 {
		t.Skip("fixture: rank 1 has no capability its peer has")
	}
	launchtest.Run(t, 2, ok)
}

// A rank that skips after its function returned, in the rest of the test,
// fails the test too.
func TestRankSkippingAfterFnFailsParent(t *testing.T) {
	if !fixture() {
		observeFailure(t, "rank 0 skipped TestRankSkippingAfterFnFailsParent: a rank may not skip")
		return
	}
	launchtest.Run(t, 2, ok)
	if p, child := launch.Self(); child && p.Rank == 0 {
		t.Skip("fixture: rank 0 skips once the job is done")
	}
}

// A rank whose -test.run matches nothing (here, a subtest named after the
// process that creates it) runs no test and exits 0: the parent fails.
func TestRankMatchingNothingFailsParent(t *testing.T) {
	if !fixture() {
		observeFailure(t,
			"rank 0 never began the job's function",
			"rank 1 never began the job's function")
		return
	}
	t.Run(fmt.Sprint(os.Getpid()), func(t *testing.T) {
		launchtest.Run(t, 2, ok)
	})
}

// A rank that exits with status 0 in the middle of its function fails the
// test.
func TestRankExitingEarlyFailsParent(t *testing.T) {
	if !fixture() {
		observeFailure(t, "rank 1 began TestRankExitingEarlyFailsParent but never finished it")
		return
	}
	launchtest.Run(t, 2, func(p launch.Proc) error {
		if p.Rank == 1 {
			os.Exit(0)
		}
		return nil
	})
}

// A rank named in ExitEarly may exit with status 0 before its function
// returns...
func TestExitEarlyRankMayExit(t *testing.T) {
	launchtest.RunOpts(t, 3, launchtest.Options{ExitEarly: []int{2}}, func(p launch.Proc) error {
		if p.Rank == 2 {
			os.Exit(0)
		}
		return nil
	})
}

// ...but must not finish it: a test that meant a rank to die and saw it
// live proved nothing.
func TestExitEarlyRankFinishingFailsParent(t *testing.T) {
	if !fixture() {
		observeFailure(t, "rank 1 finished TestExitEarlyRankFinishingFailsParent, but Options.ExitEarly says it exits before fn returns")
		return
	}
	launchtest.RunOpts(t, 2, launchtest.Options{ExitEarly: []int{1}}, ok)
}

// A rank whose function fails fails the test, as before the reports.
func TestRankFailingFailsParent(t *testing.T) {
	if !fixture() {
		observeFailure(t, "launch: rank 0 failed: exit status 1", "rank 0: fixture: rank 0 fails")
		return
	}
	launchtest.Run(t, 2, func(p launch.Proc) error {
		if p.Rank == 0 {
			return errors.New("fixture: rank 0 fails")
		}
		return nil
	})
}

// Jobs launched in sequence by one test each run only their own function:
// the second job's ranks do not run the first job's, nor the reverse.
func TestJobsInSequence(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		if p.Size != 2 {
			return fmt.Errorf("first job's function run in a job of %d", p.Size)
		}
		return nil
	})
	launchtest.Run(t, 3, func(p launch.Proc) error {
		if p.Size != 3 {
			return fmt.Errorf("second job's function run in a job of %d", p.Size)
		}
		return nil
	})
}

// killAfterPeerBegan kills this rank with SIGKILL once every other rank of
// the job has begun its function (each marks it with a file in the job's
// directory), as Options.Killed requires.
func killAfterPeerBegan(p launch.Proc) error {
	dir := launch.JobDir(p.Job)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if p.Rank != 1 {
		return os.WriteFile(fmt.Sprintf("%s/began-%d", dir, p.Rank), nil, 0o600)
	}
	for r := 0; r < p.Size; r++ {
		for r != 1 {
			if _, err := os.Stat(fmt.Sprintf("%s/began-%d", dir, r)); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	unix.Kill(os.Getpid(), unix.SIGKILL)
	select {}
}

// A rank named in Killed may die by SIGKILL; the launcher kills the rest.
func TestKilledRankMayDie(t *testing.T) {
	launchtest.RunOpts(t, 2, launchtest.Options{Killed: []int{1}}, func(p launch.Proc) error {
		if err := killAfterPeerBegan(p); err != nil {
			return err
		}
		if p.Rank == 0 {
			time.Sleep(time.Minute) // killed by the launcher
		}
		return nil
	})
}

// A job whose Killed rank lived fails: the test meant it to die.
func TestKilledRankLivingFailsParent(t *testing.T) {
	if !fixture() {
		observeFailure(t, "the job ended with no rank failed, but Options.Killed says rank [1] dies by SIGKILL")
		return
	}
	launchtest.RunOpts(t, 2, launchtest.Options{Killed: []int{1}}, ok)
}

// Killed accepts no other way to fail: a rank that fails before the
// killed one dies fails the test, with its error.
func TestKilledJobWithFailingRankFailsParent(t *testing.T) {
	if !fixture() {
		observeFailure(t, "launch: rank 0 failed: exit status 1", "but Options.Killed says rank [1] dies by SIGKILL", "rank 0: fixture: rank 0 fails")
		return
	}
	launchtest.RunOpts(t, 2, launchtest.Options{Killed: []int{1}}, func(p launch.Proc) error {
		if p.Rank == 0 {
			return errors.New("fixture: rank 0 fails")
		}
		time.Sleep(time.Minute) // killed by the launcher
		return nil
	})
}

// A Killed rank must have begun its function: one killed before it (here,
// before launchtest.Run) proves nothing, and the reports catch it.
func TestKilledRankNeverBeginningFailsParent(t *testing.T) {
	if !fixture() {
		observeFailure(t, "rank 1 never began the job's function in TestKilledRankNeverBeginningFailsParent")
		return
	}
	if p, child := launch.Self(); child && p.Rank == 1 {
		unix.Kill(os.Getpid(), unix.SIGKILL)
	}
	launchtest.RunOpts(t, 2, launchtest.Options{Killed: []int{1}}, func(p launch.Proc) error {
		time.Sleep(time.Minute) // killed by the launcher
		return nil
	})
}

// RunExample judges an example's ranks by their reports too: ranks that
// run no example (here, a name that matches none) fail it.
func TestExampleMatchingNothingFails(t *testing.T) {
	err := launchtest.RunExample("ExampleNoSuchExample", 2, ok)
	if err == nil || !strings.Contains(err.Error(), "rank 0 never began the job's function in ExampleNoSuchExample") {
		t.Fatalf("RunExample of an example that does not exist: %v, want an error saying rank 0 never began", err)
	}
}

// RunExample runs an example's ranks and returns nil once each has run
// its function to the end.
func ExampleRunExample() {
	err := launchtest.RunExample("ExampleRunExample", 2, func(p launch.Proc) error {
		if p.Size != 2 {
			return fmt.Errorf("a job of %d", p.Size)
		}
		return nil
	})
	fmt.Println(err)
	// Output: <nil>
}

// A job that stops reporting is stopped once Timeout has passed with no
// report, and every rank's stack shows where it waited.
func TestStalledJobFailsWithStacks(t *testing.T) {
	if !fixture() {
		observeFailure(t, "launchtest: no rank reported progress for 1s", "goroutine ", "waitForever")
		return
	}
	launchtest.RunOpts(t, 2, launchtest.Options{Timeout: time.Second}, func(p launch.Proc) error {
		waitForever()
		return nil
	})
}

func waitForever() { time.Sleep(time.Hour) }

// A job that reports progress runs past its Timeout: only a stall fails
// it.
func TestProgressKeepsJobAlive(t *testing.T) {
	const timeout = 2 * time.Second
	launchtest.RunOpts(t, 2, launchtest.Options{Timeout: timeout}, func(p launch.Proc) error {
		for start := time.Now(); time.Since(start) < 3*timeout; {
			time.Sleep(timeout / 20)
			launchtest.Progress()
		}
		return nil
	})
}
