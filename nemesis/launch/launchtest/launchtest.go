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
// named in Options.ExitEarly.
//
// A test may launch several jobs in sequence: each child runs fn only for
// the call to Run that started it, counted from the start of the test.
package launchtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
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

// DefaultTimeout bounds a job started by Run: a hung rank fails the test
// instead of hanging the whole test binary.
const DefaultTimeout = 2 * time.Minute

// Options tune Run; the zero value is fine.
type Options struct {
	Timeout time.Duration // DefaultTimeout when zero
	Job     string        // job name; a fresh one when empty (see launch.JobDir)
	Env     []string
	Setup   func(rank int, cmd *exec.Cmd) error // see launch.Options.Setup
	// Outcome, when set, judges how the job ended (nil, or the
	// *launch.Error of a rank that failed or was killed) instead of
	// failing the test unless every rank succeeded. When it accepts a
	// failed job, the ranks' reports are not checked: the job was meant
	// to end before they could finish.
	Outcome func(err error) error
	// ExitEarly lists the ranks meant to exit, with status 0, before fn
	// returns: a rank that plays a peer dying. They must begin fn and
	// must not finish it; every other rank must finish.
	ExitEarly []int
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
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	rep, err := newReports()
	if err != nil {
		t.Fatalf("launchtest: %v", err)
	}
	defer rep.close()
	var out syncbuf.Buffer
	err = launch.Run(context.Background(), launch.Options{
		Procs:   procs,
		Job:     o.Job,
		Args:    []string{"-test.run=" + runPattern(t.Name()), "-test.count=1", "-test.v"},
		Env:     append([]string{envTest + "=" + t.Name(), fmt.Sprintf("%s=%d", envCall, call)}, o.Env...),
		Timeout: timeout,
		Stdout:  &out,
		Stderr:  &out,
		Setup:   rep.setup(o.Setup),
	})
	records, rerr := rep.collect()
	failed := err != nil
	if o.Outcome != nil {
		err = o.Outcome(err)
	}
	switch {
	case err != nil:
	case rerr != nil:
		err = fmt.Errorf("launchtest: reading the ranks' reports: %w", rerr)
	case !failed || o.Outcome == nil:
		err = judge(records, procs, call, t.Name(), o.ExitEarly, out.String())
	}
	if err != nil {
		t.Fatalf("%v\n--- output of the job ---\n%s", err, out.String())
	}
	if testing.Verbose() {
		t.Logf("job output:\n%s", out.String())
	}
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
	rep.send(t, record{event: eventBegin, rank: p.Rank, call: call, test: t.Name()})
	// The end is reported once the whole test has run, deferred calls
	// included, so that a skip or a failure after fn still counts.
	t.Cleanup(func() {
		switch {
		case t.Skipped():
			rep.send(t, record{event: eventSkip, rank: p.Rank, call: call, test: t.Name()})
		case !t.Failed():
			rep.send(t, record{event: eventEnd, rank: p.Rank, call: call, test: t.Name()})
		}
	})
	if err := fn(p); err != nil {
		t.Fatalf("rank %d: %v", p.Rank, err)
	}
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
