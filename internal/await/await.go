// Package await is the module's one wait loop: poll, and when a poll moved
// nothing, spin, yield or sleep; fail when the awaited work stops making
// progress or a peer it depends on is gone, never because time passed.
//
// Loop.Until drives a Driver (an endpoint, an LMT engine, a network
// endpoint: whatever polls) until a Cond is done. The Driver says what
// progress is (a Mark that changes when anything moved), how to idle, and
// whether the peers live; the Loop counts rounds, checks liveness, the
// context and, when asked, the stall. It allocates nothing per wait.
//
// A fixed deadline fails a job that is slow but advancing: 192 ranks
// started on two CPUs beside other jobs can take minutes to join, one by
// one. A Loop with a Stall instead watches the Mark and fails only when it
// stays the same for a whole Stall interval; the deadline is re-armed each
// time it moves. Poll.Until is the Loop for waits with nothing to poll but
// a look at shared memory (ranks joining), sleeping between looks. A look
// or a liveness check that finds the work can never finish (the process
// that was to do it is dead) ends the wait at once.
package await

import (
	"context"
	"fmt"
	"time"
)

// Look reports how far the awaited work has come: a count that changes
// whenever it advances (ranks joined, bytes moved), whether it is done,
// and an error that ends the wait at once (a peer found dead).
type Look func() (count uint64, done bool, err error)

// Poll is how to wait. Between looks it sleeps, starting at MinSleep and
// doubling up to MaxSleep, so that a short wait is answered in
// microseconds and a long one costs little CPU.
type Poll struct {
	Stall    time.Duration // the longest time the count may stay unchanged
	MinSleep time.Duration // the first sleep; 50 µs when zero
	MaxSleep time.Duration // the longest sleep; 5 ms when zero
}

// StallError says that the count stayed the same for a whole Stall
// interval, and where it stood.
type StallError struct {
	Count uint64
	Stall time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("no progress for %v (stuck at %d)", e.Stall, e.Count)
}

// Until looks until the work is done (nil), a look fails (its error), the
// count stalls for p.Stall (a *StallError) or ctx ends (its error). It is
// a Loop whose Driver sleeps between two looks.
func (p Poll) Until(ctx context.Context, look Look) error {
	w := &looking{look: look, ctx: ctx, sleep: p.MinSleep, maxSleep: p.MaxSleep}
	if w.sleep <= 0 {
		w.sleep = 50 * time.Microsecond
	}
	if w.maxSleep < w.sleep {
		w.maxSleep = max(w.sleep, 5*time.Millisecond)
	}
	return Loop{Stall: p.Stall}.Until(ctx, w, w)
}

// looking is a Poll's wait: the look is the Cond and its count the Mark;
// the sleep between two looks, which doubles from one to the next
// whether the count moved or not, is the round's Advance.
type looking struct {
	look            Look
	ctx             context.Context
	count           uint64
	sleep, maxSleep time.Duration
}

func (w *looking) Done() (bool, error) {
	count, done, err := w.look()
	w.count = count
	return done, err
}

func (w *looking) Advance() error {
	err := sleepCtx(w.ctx, w.sleep)
	w.sleep = min(2*w.sleep, w.maxSleep)
	return err
}

func (w *looking) Mark() uint64   { return w.count }
func (w *looking) Idle(int) error { return nil }
func (w *looking) Live() error    { return nil }

func sleepCtx(ctx context.Context, d time.Duration) error {
	if ctx.Done() == nil {
		time.Sleep(d)
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
