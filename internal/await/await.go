// Package await waits for what other processes bring about (ranks joining
// a job, bytes arriving), failing only when they stop making progress.
//
// A fixed deadline fails a job that is slow but advancing: 192 ranks
// started on two CPUs beside other jobs can take minutes to join, one by
// one. Poll.Until instead watches a count that grows as the work advances
// and fails only when the count stays the same for a whole Stall
// interval; the deadline is re-armed each time it moves. A look that finds
// the work can never finish (the process that was to do it is dead)
// returns its error at once.
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
// count stalls for p.Stall (a *StallError) or ctx ends (its error).
func (p Poll) Until(ctx context.Context, look Look) error {
	minSleep, maxSleep := p.MinSleep, p.MaxSleep
	if minSleep <= 0 {
		minSleep = 50 * time.Microsecond
	}
	if maxSleep < minSleep {
		maxSleep = max(minSleep, 5*time.Millisecond)
	}
	var last uint64
	var deadline time.Time
	for sleep := minSleep; ; sleep = min(2*sleep, maxSleep) {
		count, done, err := look()
		if done || err != nil {
			return err
		}
		now := time.Now()
		switch {
		case deadline.IsZero() || count != last:
			last, deadline = count, now.Add(p.Stall)
		case now.After(deadline):
			return &StallError{Count: count, Stall: p.Stall}
		}
		if err := sleepCtx(ctx, sleep); err != nil {
			return err
		}
	}
}

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
