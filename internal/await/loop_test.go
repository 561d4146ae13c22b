package await

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fake is a Driver whose polls move what the test scripts: moves[i] says
// whether the i-th Advance moved anything.
type fake struct {
	moves          []bool
	polls, mark    uint64
	idles, lives   int
	lastIdle       int
	liveErr        error
	liveAfter      int // Live fails from this call on (0: never)
	cancelAtPoll   uint64
	cancel         context.CancelFunc
	doneAt         uint64 // Done from this poll on (0: never)
	advanceErr     error
	advanceErrPoll uint64
}

func (f *fake) Advance() error {
	f.polls++
	if f.advanceErr != nil && f.polls == f.advanceErrPoll {
		return f.advanceErr
	}
	if i := int(f.polls - 1); i < len(f.moves) && f.moves[i] {
		f.mark++
	}
	if f.cancel != nil && f.polls == f.cancelAtPoll {
		f.cancel()
	}
	return nil
}
func (f *fake) Mark() uint64        { return f.mark }
func (f *fake) Idle(n int) error    { f.idles++; f.lastIdle = n; return nil }
func (f *fake) Done() (bool, error) { return f.doneAt != 0 && f.polls >= f.doneAt, nil }
func (f *fake) Live() error {
	f.lives++
	if f.liveAfter != 0 && f.lives >= f.liveAfter {
		return f.liveErr
	}
	return nil
}

// A Cond done before the first poll ends the wait without a poll.
func TestLoopDoneAtOnce(t *testing.T) {
	f := &fake{doneAt: 0}
	err := Loop{}.Until(context.Background(), f, CondFunc(func() (bool, error) { return true, nil }))
	if err != nil || f.polls != 0 || f.idles != 0 {
		t.Fatalf("got %v after %d polls and %d idles, want nil after none", err, f.polls, f.idles)
	}
}

// Busy rounds do not idle, and the idle count starts over after one.
func TestLoopBusyResetsIdle(t *testing.T) {
	// polls 1-3 idle, 4 busy, 5-6 idle, done at 7
	f := &fake{moves: []bool{false, false, false, true, false, false}, doneAt: 7}
	if err := (Loop{}).Until(context.Background(), f, f); err != nil {
		t.Fatal(err)
	}
	if f.polls != 7 || f.idles != 5 || f.lastIdle != 2 {
		t.Fatalf("%d polls, %d idles, last idle %d; want 7 polls, 5 idles, the last the 2nd in a row", f.polls, f.idles, f.lastIdle)
	}
}

// A dead peer, found by the liveness check every Every idle rounds, ends
// the wait with its error; so does one found every BusyEvery busy rounds.
func TestLoopLivenessEnds(t *testing.T) {
	dead := errors.New("rank 3 is gone")
	f := &fake{liveErr: dead, liveAfter: 2}
	err := Loop{Every: 32}.Until(context.Background(), f, f)
	if err != dead || f.polls != 64 || f.lives != 2 {
		t.Fatalf("idle: got %v after %d polls, %d checks; want the peer's error after 64 polls, 2 checks", err, f.polls, f.lives)
	}
	moves := make([]bool, 100)
	for i := range moves {
		moves[i] = true
	}
	f = &fake{moves: moves, liveErr: dead, liveAfter: 1}
	err = Loop{BusyEvery: 10}.Until(context.Background(), f, f)
	if err != dead || f.polls != 10 || f.idles != 0 {
		t.Fatalf("busy: got %v after %d polls, %d idles; want the peer's error after 10 busy polls", err, f.polls, f.idles)
	}
}

// A poll's error ends the wait at once.
func TestLoopAdvanceError(t *testing.T) {
	bad := errors.New("queue corrupt")
	f := &fake{advanceErr: bad, advanceErrPoll: 5}
	if err := (Loop{}).Until(context.Background(), f, f); err != bad || f.polls != 5 {
		t.Fatalf("got %v after %d polls, want the poll's error after 5", err, f.polls)
	}
}

// Cancelling the context ends the wait at the next idle round.
func TestLoopCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fake{cancel: cancel, cancelAtPoll: 7}
	if err := (Loop{}).Until(ctx, f, f); !errors.Is(err, context.Canceled) || f.polls != 7 {
		t.Fatalf("got %v after %d polls, want context.Canceled after 7", err, f.polls)
	}
}

// A Mark that stays put for a whole Stall fails the wait with a
// *StallError saying where it stood; one that keeps moving never does.
func TestLoopStall(t *testing.T) {
	const stall = 5 * time.Millisecond
	f := &fake{moves: []bool{true, true, true}}
	start := time.Now()
	err := Loop{Stall: stall}.Until(context.Background(), f, f)
	var se *StallError
	if !errors.As(err, &se) || se.Count != 3 || se.Stall != stall {
		t.Fatalf("a mark stuck at 3: %v, want a StallError at 3", err)
	}
	if took := time.Since(start); took < stall {
		t.Fatalf("failed after %v, before the %v stall", took, stall)
	}
}

// The loop allocates nothing per wait, busy or idle, done at once or not.
func TestLoopAllocatesNothing(t *testing.T) {
	f := &fake{moves: []bool{true, false, true}, doneAt: 1}
	ctx := context.Background()
	l := Loop{Every: 2, Stall: time.Hour}
	allocs := testing.AllocsPerRun(100, func() {
		f.polls, f.doneAt = 0, 6
		if err := l.Until(ctx, f, f); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per wait", allocs)
	}
}
