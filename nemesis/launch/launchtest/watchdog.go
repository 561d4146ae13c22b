package launchtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/knemesis/knemesis/internal/await"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// A job's deadline follows its progress: the job is stopped only when no
// rank has reported anything (begin, end, or Progress) for the whole
// Options.Timeout, so that a job slowed down by an oversubscribed machine,
// whose ranks still advance, is never failed for it. A stalled job's
// ranks get SIGQUIT first: the Go runtime prints every goroutine's stack,
// so that the failure shows what each rank was waiting for.

// quitGrace is how long stalled ranks get to print their stacks before the
// launcher kills them.
const quitGrace = 5 * time.Second

// watchdog stops a job once its reports stall.
type watchdog struct {
	mu    sync.Mutex
	cmds  []*exec.Cmd
	stall *await.StallError
}

// setup records each rank's command, to signal it later.
func (w *watchdog) setup(next func(int, *exec.Cmd) error) func(int, *exec.Cmd) error {
	return func(rank int, cmd *exec.Cmd) error {
		w.mu.Lock()
		w.cmds = append(w.cmds, cmd)
		w.mu.Unlock()
		return next(rank, cmd)
	}
}

// watch runs until ctx ends; when reports() stays the same for stall, it
// asks the ranks for their stacks and then calls cancel, which makes the
// launcher kill them.
func (w *watchdog) watch(ctx context.Context, cancel context.CancelFunc, stall time.Duration, reports func() uint64) {
	err := await.Poll{Stall: stall, MinSleep: 10 * time.Millisecond, MaxSleep: 200 * time.Millisecond}.Until(ctx,
		func() (uint64, bool, error) { return reports(), false, nil })
	var se *await.StallError
	if !errors.As(err, &se) {
		return
	}
	w.mu.Lock()
	w.stall = se
	for _, c := range w.cmds {
		if c.Process != nil {
			_ = c.Process.Signal(syscall.SIGQUIT)
		}
	}
	w.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(quitGrace):
	}
	cancel()
}

// stalled returns the error of a job the watchdog stopped, nil otherwise.
func (w *watchdog) stalled() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stall == nil {
		return nil
	}
	return fmt.Errorf("launchtest: no rank reported progress for %v (%d reports in all): the ranks were stopped, their stacks are in the output", w.stall.Stall, w.stall.Count)
}

// Progress reports, from a rank, that its job advances: a step done, a
// message moved. The parent stops a job only when no rank reported
// anything for Options.Timeout, so a long job calls it between its steps.
// Outside a rank started by Run it does nothing.
func Progress() {
	p, ok := launch.Self()
	if !ok {
		return
	}
	rep, err := reporter()
	if err != nil {
		return
	}
	call, _ := strconv.Atoi(os.Getenv(envCall))
	_ = rep.send(record{event: eventProgress, rank: p.Rank, call: call, test: os.Getenv(envTest)})
}
