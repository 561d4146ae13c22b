package nemesis

import (
	"context"
	"runtime"

	"github.com/knemesis/knemesis/internal/await"
	"golang.org/x/sys/unix"
)

// The endpoint as the one wait loop's Driver (package internal/await):
// a round is a Poll, progress is progressMark, idling spins, sleeps on the
// LMT's descriptors, yields, then dozes (doze.go), and liveness is the
// peers' check every LivenessInterval. A blocked call fails for a peer
// found gone, never for the time it waited: MPI's blocking calls wait for
// a live peer however late it is.

// driving is an Endpoint as the wait loop's Driver: a pointer conversion,
// so that a blocked call allocates nothing.
type driving Endpoint

// waitLoop checks liveness every 32 idle rounds (the clock is read no
// more often while spinning) and every 1024 busy ones: traffic that is
// not a call's own must not keep it from noticing that the rank it waits
// for has died.
var waitLoop = await.Loop{Every: 32, BusyEvery: 1024}

// wait is every blocked call of the endpoint: it drives the endpoint until
// c is done.
func (ep *Endpoint) wait(ctx context.Context, c await.Cond) error {
	return waitLoop.Until(ctx, (*driving)(ep), c)
}

func (d *driving) Advance() error { return (*Endpoint)(d).Poll() }
func (d *driving) Mark() uint64   { return (*Endpoint)(d).progressMark() }
func (d *driving) Live() error    { return (*Endpoint)(d).livenessDue() }

// Idle is called after the n-th Poll in a row that moved nothing: spin
// (SpinBeforeYield says for how long), or sleep in poll(2) on the pipes
// the LMT's transfers wait for, then yield the CPU, then doze.
func (d *driving) Idle(n int) error {
	ep := (*Endpoint)(d)
	if n >= spinBeforePoll && ep.sleepOnLMT() {
		return nil
	}
	if n < SpinBeforeYield {
		return nil
	}
	if n >= SpinBeforeYield+yieldsBeforeDoze && ep.canDoze() {
		return ep.doze(n)
	}
	ep.stats.Yields++
	runtime.Gosched() // the peer may be a goroutine of this process
	_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	return nil
}
