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
package launchtest

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/syncbuf"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// envTest names the test a child was started for, so that a child never runs
// a job of its own when a test launches several jobs in sequence.
const envTest = "KNEMESIS_LAUNCHTEST"

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
	// failing the test unless every rank succeeded.
	Outcome func(err error) error
}

// Run runs fn in procs child processes, as the ranks of one job.
func Run(t testing.TB, procs int, fn func(p launch.Proc) error) {
	t.Helper()
	RunOpts(t, procs, Options{}, fn)
}

// RunOpts is Run with options.
func RunOpts(t testing.TB, procs int, o Options, fn func(p launch.Proc) error) {
	t.Helper()
	if p, ok := launch.Self(); ok {
		if os.Getenv(envTest) != t.Name() {
			t.Fatalf("launchtest: child of test %q asked to run %q", os.Getenv(envTest), t.Name())
		}
		if err := fn(p); err != nil {
			t.Fatalf("rank %d: %v", p.Rank, err)
		}
		return
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	var out syncbuf.Buffer
	err := launch.Run(context.Background(), launch.Options{
		Procs:   procs,
		Job:     o.Job,
		Args:    []string{"-test.run=" + runPattern(t.Name()), "-test.count=1", "-test.v"},
		Env:     append([]string{envTest + "=" + t.Name()}, o.Env...),
		Timeout: timeout,
		Stdout:  &out,
		Stderr:  &out,
		Setup:   o.Setup,
	})
	if o.Outcome != nil {
		err = o.Outcome(err)
	}
	if err != nil {
		t.Fatalf("%v\n--- output of the job ---\n%s", err, out.String())
	}
	if testing.Verbose() {
		t.Logf("job output:\n%s", out.String())
	}
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
