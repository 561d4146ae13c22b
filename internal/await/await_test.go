package await

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A count that keeps moving is never failed, however long the whole wait
// takes: here several times the stall interval.
func TestAdvancingIsNotFailed(t *testing.T) {
	const stall = 20 * time.Millisecond
	start := time.Now()
	var n uint64
	err := Poll{Stall: stall}.Until(context.Background(), func() (uint64, bool, error) {
		n++
		return n, time.Since(start) > 5*stall, nil
	})
	if err != nil {
		t.Fatalf("a wait whose count moved at every look: %v, want nil", err)
	}
}

// A count that stays put fails the wait once a whole interval has passed
// since it last moved, and the error says where it stood.
func TestStallFails(t *testing.T) {
	const stall = 20 * time.Millisecond
	var looks uint64
	var moved time.Time
	err := Poll{Stall: stall}.Until(context.Background(), func() (uint64, bool, error) {
		looks++
		if looks <= 3 {
			moved = time.Now()
			return looks, false, nil
		}
		return 3, false, nil
	})
	var se *StallError
	if !errors.As(err, &se) || se.Count != 3 || se.Stall != stall {
		t.Fatalf("a count stuck at 3: %v, want a StallError at 3 after %v", err, stall)
	}
	if since := time.Since(moved); since < stall {
		t.Fatalf("failed %v after the count last moved, before the %v interval", since, stall)
	}
}

// A look that finds the work can never finish ends the wait at once.
func TestLookErrorEndsAtOnce(t *testing.T) {
	dead := errors.New("rank 0 is dead")
	looks := 0
	err := Poll{Stall: time.Hour}.Until(context.Background(), func() (uint64, bool, error) {
		looks++
		if looks == 2 {
			return 0, false, dead
		}
		return 0, false, nil
	})
	if err != dead || looks != 2 {
		t.Fatalf("got %v after %d looks, want the look's error after 2", err, looks)
	}
}

// Cancelling the context ends the wait with the context's error.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	looks := 0
	err := Poll{Stall: time.Hour}.Until(ctx, func() (uint64, bool, error) {
		looks++
		if looks == 3 {
			cancel()
		}
		return 0, false, nil
	})
	if !errors.Is(err, context.Canceled) || looks != 3 {
		t.Fatalf("got %v after %d looks, want context.Canceled after 3", err, looks)
	}
}
