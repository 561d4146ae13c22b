package await

import (
	"context"
	"time"
)

// Driver is what a Loop drives: an endpoint, an LMT engine, a network
// endpoint. Its methods are called from the waiting goroutine only.
type Driver interface {
	// Advance makes one round of progress (one poll). Its error ends
	// the wait.
	Advance() error
	// Mark is a count that changes whenever anything moved (packets,
	// payload, completions), for this wait or another: a round that
	// changed it was busy, and the work is advancing.
	Mark() uint64
	// Idle is called after the n-th round in a row that moved nothing:
	// the driver spins on (returns at once), yields the CPU, or sleeps on
	// what will wake it (a descriptor, a futex, a timer). What its own
	// polls move while it does counts as progress at the next round.
	Idle(n int) error
	// Live checks that the peers the work depends on still live: an
	// error (a peer found dead, with what depended on it failed) ends
	// the wait. It is called at most once per Loop.Every idle rounds or
	// Loop.BusyEvery busy ones, and may check less often.
	Live() error
}

// Cond is what a Loop waits for: done, or an error that ends the wait.
type Cond interface {
	Done() (bool, error)
}

// CondFunc makes a function a Cond. A func value is one pointer, so the
// conversion to Cond allocates nothing.
type CondFunc func() (bool, error)

// Done implements Cond.
func (f CondFunc) Done() (bool, error) { return f() }

// Loop is the one way this module waits: poll, and when a poll moved
// nothing, let the Driver spin, yield or sleep; fail when the work stops
// advancing, never because time has passed while it advanced.
//
// A wait ends when its Cond is done, with the Cond's, the Driver's or the
// liveness check's error, when ctx ends (noticed at the next idle round:
// within the Driver's longest sleep), or with a *StallError when Stall is
// set and the Driver's Mark stayed the same for a whole Stall. With no
// Stall, a wait on a live peer that sends nothing lasts as long as ctx:
// MPI's blocking calls wait for a peer however late it is, and liveness
// fails those whose peer is gone.
//
// Until allocates nothing and reads no clock while the Cond is done
// before the first poll or the rounds are busy, so that a Wait on a
// request that completed is one call and a test.
type Loop struct {
	Stall time.Duration // 0: no failure for lack of progress alone
	// Every is how many idle rounds pass between two liveness and
	// stall checks (default 1); BusyEvery how many busy rounds pass
	// between two liveness checks (default 1024): traffic that is not
	// this wait's must not keep it from noticing a dead peer.
	Every, BusyEvery int
}

// Until drives d until c is done and returns c's error, or the first
// error that ends the wait (see Loop).
func (l Loop) Until(ctx context.Context, d Driver, c Cond) error {
	if ok, err := c.Done(); ok || err != nil {
		return err
	}
	every, busyEvery := max(l.Every, 1), l.BusyEvery
	if busyEvery <= 0 {
		busyEvery = 1024
	}
	var (
		last     = d.Mark()
		idle     int // idle rounds in a row
		busy     int // busy rounds since the last liveness check
		moved    bool
		deadline time.Time
	)
	for {
		if err := d.Advance(); err != nil {
			return err
		}
		if ok, err := c.Done(); ok || err != nil {
			return err
		}
		if m := d.Mark(); m != last {
			last, idle, moved = m, 0, true
			if busy++; busy >= busyEvery {
				busy = 0
				if err := d.Live(); err != nil {
					return err
				}
			}
			continue
		}
		if done := ctx.Done(); done != nil {
			select {
			case <-done:
				return ctx.Err()
			default:
			}
		}
		if idle++; idle%every == 0 {
			if err := d.Live(); err != nil {
				return err
			}
			if l.Stall > 0 {
				now := time.Now()
				switch {
				case moved || deadline.IsZero():
					moved, deadline = false, now.Add(l.Stall)
				case now.After(deadline):
					return &StallError{Count: last, Stall: l.Stall}
				}
			}
		}
		if err := d.Idle(idle); err != nil {
			return err
		}
	}
}
