package nemesis

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestCancel: a cancelled receive completes with ErrCanceled and is never
// matched afterwards: the message it would have taken goes to the receive
// posted after it, and its buffer stays untouched; cancelling it again is
// nil, and the wildcard counts it held are given back.
func TestCancel(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 8})
	a, b := eps[0], eps[1]
	for _, c := range []struct {
		src, tag int
		want     string
	}{
		{0, 5, "nemesis: receive canceled: receive from rank 0 with tag 5"},
		{AnySource, AnyTag, "nemesis: receive canceled: receive from any rank with any tag"},
	} {
		var cancelled, next Request
		gone, buf := make([]byte, 16), make([]byte, 16)
		if err := b.Irecv(&cancelled, c.src, c.tag, gone); err != nil {
			t.Fatal(err)
		}
		if err := b.Cancel(&cancelled); err != nil {
			t.Fatalf("Cancel of a posted receive: %v", err)
		}
		if err := b.Cancel(&cancelled); err != nil {
			t.Fatalf("second Cancel: %v", err)
		}
		if err := b.Wait(&cancelled); !errors.Is(err, ErrCanceled) || err.Error() != c.want {
			t.Fatalf("Wait of the cancelled receive: %v, want %q", err, c.want)
		}
		if b.wildcards != 0 || b.peers[0].expectN != 0 {
			t.Fatalf("after Cancel: %d wildcard receives and %d from rank 0 still counted", b.wildcards, b.peers[0].expectN)
		}
		if err := a.Send(1, 5, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		if err := b.Irecv(&next, c.src, c.tag, buf); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(&next); err != nil || string(buf[:next.Status().Count]) != "hello" {
			t.Fatalf("the receive after the cancelled one: %q, %v", buf[:next.Status().Count], err)
		}
		if !bytes.Equal(gone, make([]byte, 16)) || cancelled.Status().Count != 0 {
			t.Fatalf("the cancelled receive's buffer was written: %x", gone)
		}
	}
}

// TestCancelMatched: a receive that matched a message cannot be taken
// back, whether the message is all in or still arriving through the
// cells; Cancel says ErrMatched, and the receive completes intact. Sends
// and requests never started are refused.
func TestCancelMatched(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 4})
	a, b := eps[0], eps[1]
	if err := a.Send(1, 1, []byte("in")); err != nil {
		t.Fatal(err)
	}
	var r Request
	buf := make([]byte, 8)
	if err := b.Irecv(&r, 0, 1, buf); err != nil {
		t.Fatal(err)
	}
	const wantDone = "nemesis: receive already matched: the receive completed (message from rank 0, tag 1, 2 bytes; error <nil>)"
	if err := b.Cancel(&r); !errors.Is(err, ErrMatched) || err.Error() != wantDone {
		t.Fatalf("Cancel of a complete receive: %v, want %q", err, wantDone)
	}

	msg := pattern(10*a.CellPayload(), 3) // more than the 4 cells: arrives in turns
	var s Request
	if err := a.Isend(&s, 1, 2, msg); err != nil {
		t.Fatal(err)
	}
	b.Poll()
	big := make([]byte, len(msg))
	if err := b.Irecv(&r, 0, 2, big); err != nil {
		t.Fatal(err)
	}
	if r.Done() {
		t.Fatal("test setup: the message arrived whole before the receive")
	}
	wantArriving := fmt.Sprintf("nemesis: receive already matched: the receive matched a message from rank 0, tag 2, %d bytes, still arriving: Wait for it", len(msg))
	if err := b.Cancel(&r); !errors.Is(err, ErrMatched) || err.Error() != wantArriving {
		t.Fatalf("Cancel of a receive being filled: %v, want %q", err, wantArriving)
	}
	for !(s.Done() && r.Done()) {
		a.Poll()
		b.Poll()
	}
	if r.Err() != nil || !bytes.Equal(big, msg) {
		t.Fatalf("the receive Cancel refused: %v, %d bytes equal", r.Err(), r.Status().Count)
	}
	if err := a.Cancel(&s); !errors.Is(err, ErrNotSupported) || err.Error() != "nemesis: not supported: Cancel of a send to rank 1: only receives can be cancelled" {
		t.Errorf("Cancel of a send: %v", err)
	}
	var idle Request
	if err := b.Cancel(&idle); !errors.Is(err, ErrInvalidArg) {
		t.Errorf("Cancel of a request never started: %v", err)
	}
}
