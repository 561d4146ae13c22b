package lmt

import (
	"context"

	"github.com/knemesis/knemesis/internal/await"
	"golang.org/x/sys/unix"
)

// The Engine as the one wait loop's Driver (package internal/await), for
// callers that drive it alone (Wait, Drain: tests, benchmarks, a rank's
// last drain). In a job the endpoint's wait loop drives it instead, from
// its Poll.

// driving is an Engine as the wait loop's Driver: a pointer conversion.
type driving Engine

// drive runs the wait loop over the Engine and poll until c is done. poll
// is kept in the Engine for the wait, so that the loop's Driver is the
// Engine itself and the wait allocates nothing.
func (e *Engine) drive(ctx context.Context, poll func() error, c await.Cond) error {
	e.polling = poll
	err := await.Loop{}.Until(ctx, (*driving)(e), c)
	e.polling = nil
	return err
}

// Advance is one round: poll (control packets, liveness), then Progress.
func (d *driving) Advance() error {
	e := (*Engine)(d)
	if e.polling != nil {
		if err := e.polling(); err != nil {
			return err
		}
	}
	return e.Progress()
}

// Mark moves with every payload byte and control packet.
func (d *driving) Mark() uint64 { return d.bytes + d.packets }

// Idle yields the CPU after drainSpin idle rounds, to the peer the wait
// is for (which may share this CPU): as many as the endpoint's waiters
// spin (nemesis.SpinBeforeYield says why).
func (d *driving) Idle(n int) error {
	if n >= drainSpin {
		_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
	return nil
}

// Live is poll's: its watcher reports dead peers with PeerFailed, which
// fails their transfers.
func (d *driving) Live() error { return nil }

// drainSpin is how many idle rounds a wait makes before it starts
// yielding.
const drainSpin = 4096
