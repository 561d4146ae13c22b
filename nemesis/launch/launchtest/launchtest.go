// Package launchtest runs one Go test as a multi-process knemesis job.
//
//	func TestPingPong(t *testing.T) {
//		launchtest.Run(t, 2, func(p launch.Proc) error {
//			// runs in each of the 2 child processes, with p.Rank 0 and 1
//		})
//	}
//
// The parent re-executes the test binary once per rank with -test.run
// narrowed to the calling test, waits for all ranks and fails the test with
// the children's output when any rank fails. In a child, Run calls fn and
// fails the test if it returns an error.
//
// A rank's exit status alone proves little: a rank whose test skipped,
// whose -test.run matched nothing, or that exited with status 0 halfway
// through fn also exits 0. So every rank reports to the parent, on a socket
// the parent hands it, that it began fn and that its test then ended
// neither failed nor skipped, and the parent fails the test unless every
// rank sent both reports. A test that cannot run somewhere skips in the
// parent, before launching, and says why; a rank may not skip. A rank that
// is meant to exit before fn returns (one that plays a peer dying) is
// named in Options.ExitEarly, or Options.Killed when it dies by SIGKILL:
// every way a job may end is judged by the reports too. Examples launch
// their ranks with RunExample, which checks the same reports.
//
// A test may launch several jobs in sequence: each child runs fn only for
// the call to Run that started it, counted from the start of the test.
package launchtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/syncbuf"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// envTest names the test a child was started for, so that a child never runs
// a job of its own when a test launches several jobs in sequence.
const envTest = "KNEMESIS_LAUNCHTEST"

// envCall is the index of the call to Run, within its test, that started
// the child.
const envCall = "KNEMESIS_LAUNCHTEST_CALL"

// DefaultTimeout is how long a job started by Run may go without any rank
// reporting progress (see Progress): a hung job fails the test instead of
// hanging the whole test binary, a slow one that advances is not failed.
const DefaultTimeout = 2 * time.Minute

// Options tune Run; the zero value is fine.
type Options struct {
	Timeout time.Duration // the longest time with no rank reporting (Progress); DefaultTimeout when zero
	Job     string        // job name; a fresh one when empty (see launch.JobDir)
	Env     []string
	Setup   func(rank int, cmd *exec.Cmd) error // see launch.Options.Setup
	// ExitEarly lists the ranks meant to exit, with status 0, before fn
	// returns: a rank that plays a peer dying while the others go on.
	// They must begin fn and must not finish it; every other rank must
	// finish.
	ExitEarly []int
	// Killed lists the ranks meant to die by SIGKILL before fn returns.
	// The launcher then kills the others, as it does in a real job, so
	// the job must end with one of them killed; every rank must begin fn
	// (a killed rank dies only once the others have begun), the killed
	// ones must not finish it, and no rank may fail or skip.
	Killed []int
}

// Run runs fn in procs child processes, as the ranks of one job.
func Run(t testing.TB, procs int, fn func(p launch.Proc) error) {
	t.Helper()
	RunOpts(t, procs, Options{}, fn)
}

// RunOpts is Run with options.
func RunOpts(t testing.TB, procs int, o Options, fn func(p launch.Proc) error) {
	t.Helper()
	call := nextCall(t)
	if p, ok := launch.Self(); ok {
		runRank(t, p, call, fn)
		return
	}
	out, err := runJob(t.Name(), call, procs, o)
	if err != nil {
		t.Fatalf("%v\n--- output of the job ---\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("job output:\n%s", out)
	}
}

// RunExample is Run for an Example function, which has no testing.TB:
// called from the example named name, it runs fn in procs child
// processes, each re-running that example, and returns nil only when
// every rank began fn and fn returned nil; otherwise an error naming the
// ranks and quoting the job's output. In a child it runs fn as this rank
// and returns fn's error. An example calls it once.
func RunExample(name string, procs int, fn func(p launch.Proc) error) error {
	if p, ok := launch.Self(); ok {
		return exampleRank(name, p, fn)
	}
	out, err := runJob(name, 0, procs, Options{})
	if err != nil {
		return fmt.Errorf("%w\n--- output of the job ---\n%s", err, out)
	}
	return nil
}

// runJob launches the ranks of call of test (a test's name, or an
// example's) and judges how the job ended and what the ranks reported.
// It returns the ranks' output.
func runJob(test string, call, procs int, o Options) (string, error) {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	rep, err := newReports()
	if err != nil {
		return "", fmt.Errorf("launchtest: %w", err)
	}
	defer rep.close()
	var out syncbuf.Buffer
	var dog watchdog
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		dog.watch(ctx, cancel, timeout, rep.packets.Load)
	}()
	err = launch.Run(ctx, launch.Options{
		Procs:  procs,
		Job:    o.Job,
		Args:   []string{"-test.run=" + runPattern(test), "-test.count=1", "-test.v"},
		Env:    append([]string{envTest + "=" + test, fmt.Sprintf("%s=%d", envCall, call)}, o.Env...),
		Stdout: &out,
		Stderr: &out,
		Setup:  dog.setup(rep.setup(o.Setup)),
	})
	cancel()
	<-watched
	records, rerr := rep.collect()
	if err := dog.stalled(); err != nil {
		return out.String(), errors.Join(err, judge(records, procs, call, test, o, out.String()))
	}
	if err := jobEnd(err, o.Killed); err != nil {
		return out.String(), err
	}
	if rerr != nil {
		return out.String(), fmt.Errorf("launchtest: reading the ranks' reports: %w", rerr)
	}
	return out.String(), judge(records, procs, call, test, o, out.String())
}

// jobEnd checks how the job ended: well, or, when Options.Killed names
// ranks, with one of them killed by SIGKILL.
func jobEnd(err error, killed []int) error {
	if len(killed) == 0 {
		return err
	}
	var le *launch.Error
	if errors.As(err, &le) && slices.Contains(killed, le.Rank) && le.Reason == "signal: killed" {
		return nil
	}
	if err == nil {
		err = errors.New("no rank failed")
	}
	return fmt.Errorf("launchtest: the job ended with %v, but Options.Killed says rank %v dies by SIGKILL", err, killed)
}

// runRank is RunOpts in a child: fn runs only for the call that started
// this process, and the rank reports its progress to the parent.
func runRank(t testing.TB, p launch.Proc, call int, fn func(p launch.Proc) error) {
	t.Helper()
	if os.Getenv(envTest) != t.Name() {
		t.Fatalf("launchtest: child of test %q asked to run %q", os.Getenv(envTest), t.Name())
	}
	if os.Getenv(envCall) != fmt.Sprint(call) {
		return // another job of the same test
	}
	rep, err := reporter()
	if err != nil {
		t.Fatalf("launchtest: rank %d: %v", p.Rank, err)
	}
	report := func(event string) {
		if err := rep.send(record{event: event, rank: p.Rank, call: call, test: t.Name()}); err != nil {
			t.Error(err)
		}
	}
	report(eventBegin)
	// The end is reported once the whole test has run, deferred calls
	// included, so that a skip or a failure after fn still counts.
	t.Cleanup(func() {
		switch {
		case t.Skipped():
			report(eventSkip)
		case !t.Failed():
			report(eventEnd)
		}
	})
	if err := fn(p); err != nil {
		t.Fatalf("rank %d: %v", p.Rank, err)
	}
}

// exampleRank is RunExample in a child: the rank reports that it began fn
// and, when fn succeeds, that it ended.
func exampleRank(name string, p launch.Proc, fn func(p launch.Proc) error) error {
	if os.Getenv(envTest) != name {
		return fmt.Errorf("launchtest: child of %q asked to run %q", os.Getenv(envTest), name)
	}
	rep, err := reporter()
	if err == nil {
		err = rep.send(record{event: eventBegin, rank: p.Rank, call: 0, test: name})
	}
	if err != nil {
		return fmt.Errorf("launchtest: rank %d: %w", p.Rank, err)
	}
	if err := fn(p); err != nil {
		return fmt.Errorf("rank %d: %w", p.Rank, err)
	}
	return rep.send(record{event: eventEnd, rank: p.Rank, call: 0, test: name})
}

// calls counts the calls to RunOpts of each running test, in the parent
// and in a child alike, so that both number a test's jobs the same way.
var calls = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

func nextCall(t testing.TB) int {
	name := t.Name()
	calls.Lock()
	defer calls.Unlock()
	c, seen := calls.n[name]
	if !seen {
		// A test run again (-test.count) numbers its jobs from 0 again.
		t.Cleanup(func() {
			calls.Lock()
			delete(calls.n, name)
			calls.Unlock()
		})
	}
	calls.n[name] = c + 1
	return c
}

// runPattern anchors every level of a (sub)test name, so that -test.run
// selects exactly that test and none whose name merely starts the same.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}
