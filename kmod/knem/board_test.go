package knem

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/await"
)

// TestBoardWaitFollowsPuts: a get whose key comes after many other puts
// (one after each of its looks, so that the board never stops changing)
// returns its value although the wait lasts many times the stall, whatever
// the machine's load: the stall counts from the last change the waiter
// saw. A get on a board that stopped changing fails with a StallError
// naming the key it waited for and the keys the board held. Runs on the
// host: the board is plain files.
func TestBoardWaitFollowsPuts(t *testing.T) {
	b := newBoard(t)
	const stall = 5 * time.Millisecond
	const steps = 40 // looks sleep 1 ms doubling to 20 ms: the wait outlasts the stall many times
	looks := 0
	var putErr error
	start := time.Now()
	v, err := b.getWithin("last", stall, func() {
		looks++
		key, val := fmt.Sprintf("step.%d", looks), uint64(looks)
		if looks == steps {
			key, val = "last", 4242
		}
		if err := b.put(key, val); err != nil && putErr == nil {
			putErr = err
		}
	})
	if putErr != nil {
		t.Fatal(putErr)
	}
	if took := time.Since(start); err != nil || v != 4242 || looks != steps || took < 2*stall {
		t.Fatalf("get of a key put after %d others: %d, %v after %d looks and %v; want 4242, nil after %d looks and more than %v",
			steps-1, v, err, looks, took, steps, 2*stall)
	}
	_, err = b.getWithin("never", stall, nil)
	var se *await.StallError
	if !errors.As(err, &se) || se.Stall != stall || !strings.Contains(err.Error(), `no "never" on the board`) || !strings.Contains(err.Error(), `"last"`) {
		t.Fatalf("get of a key nobody puts: %v; want a StallError naming %q and the keys held", err, "never")
	}
}
