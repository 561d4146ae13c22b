package nemesis

import (
	"bytes"
	"errors"
	"testing"
)

// sendAll sends msgs from a to rank dst with blocking sends, tags 0.., while
// the receiver does not poll.
func sendAll(t *testing.T, a *Endpoint, dst int, msgs [][]byte) {
	t.Helper()
	for i, m := range msgs {
		if err := a.Send(dst, i, m); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// TestLineBoxesTakeSmallMessages: messages of up to linePayload bytes take
// the pair's line boxes, one each, until the ring is full; the next goes
// by fastbox, as does any longer message; the receiver gets all in order.
func TestLineBoxesTakeSmallMessages(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	var msgs [][]byte
	for i := range lineBoxes {
		msgs = append(msgs, pattern([]int{0, 1, 8, linePayload}[i%4], i))
	}
	sendAll(t, a, 1, msgs)
	if st := a.Stats(); st.LineMsgs != lineBoxes || st.FastboxMsgs != lineBoxes || st.Cells != 0 {
		t.Fatalf("stats after %d short messages: %+v, want all in line boxes", lineBoxes, st)
	}
	msgs = append(msgs, pattern(8, 99), pattern(linePayload+1, 98))
	if err := a.Send(1, lineBoxes, msgs[lineBoxes]); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(1, lineBoxes+1, msgs[lineBoxes+1]); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.LineMsgs != lineBoxes || st.FastboxMsgs != lineBoxes+2 || st.Cells != 0 {
		t.Fatalf("stats with the ring full: %+v, want 2 more by fastbox", st)
	}
	recvInOrder(t, b, 0, msgs)
}

// TestLineBoxesPublishEveryHalfRing: the receiver publishes its count of
// consumed line boxes every lineRelease messages, not at each one: a
// sender finding the ring full goes by fastbox until that count moves.
func TestLineBoxesPublishEveryHalfRing(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	msgs := smallMsgs(lineBoxes+2, 8, 1)
	sendAll(t, a, 1, msgs[:lineBoxes])
	recvInOrder(t, b, 0, msgs[:lineRelease-1])
	if got := a.peers[1].lnOut.done.Load(); got != 0 {
		t.Fatalf("count published after %d messages: %d, want 0", lineRelease-1, got)
	}
	if err := a.Send(1, lineBoxes, msgs[lineBoxes]); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.LineMsgs != lineBoxes || st.FastboxMsgs != lineBoxes+1 {
		t.Fatalf("stats before the count moved: %+v, want the send by fastbox", st)
	}
	buf := make([]byte, 8)
	if st, err := b.Recv(0, lineRelease-1, buf); err != nil || !bytes.Equal(buf, msgs[lineRelease-1]) {
		t.Fatalf("receive %d: %+v %v", lineRelease-1, st, err)
	}
	if got := a.peers[1].lnOut.done.Load(); got != lineRelease {
		t.Fatalf("count published after %d messages: %d, want %d", lineRelease, got, lineRelease)
	}
	if err := a.Send(1, lineBoxes+1, msgs[lineBoxes+1]); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.LineMsgs != lineBoxes+1 || st.FastboxMsgs != lineBoxes+2 {
		t.Fatalf("stats after the count moved: %+v, want the send in a line box", st)
	}
	for i := lineRelease; i < len(msgs); i++ {
		if st, err := b.Recv(0, AnyTag, buf); err != nil || st.Tag != i || !bytes.Equal(buf, msgs[i]) {
			t.Fatalf("receive %d: %+v %v", i, st, err)
		}
	}
}

// TestLineBoxesLaps: over several laps of the ring, with the receiver
// behind by up to lineRelease messages, every message takes a line box and
// arrives intact, and the stamps of one lap never read as the next's.
func TestLineBoxesLaps(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	const laps = 5
	msgs := smallMsgs(laps*lineBoxes, 24, 7)
	buf := make([]byte, 24)
	for i, m := range msgs {
		if err := a.Send(1, i, m); err != nil {
			t.Fatal(err)
		}
		if i%lineRelease != lineRelease-1 {
			continue
		}
		for j := i - lineRelease + 1; j <= i; j++ {
			if st, err := b.Recv(0, AnyTag, buf); err != nil || st.Tag != j || !bytes.Equal(buf, msgs[j]) {
				t.Fatalf("receive %d: %+v %v", j, st, err)
			}
		}
	}
	if st := a.Stats(); st.LineMsgs != laps*lineBoxes || st.Cells != 0 {
		t.Fatalf("sender stats %+v, want %d line boxes", st, laps*lineBoxes)
	}
	if got := a.peers[1].lnOut.done.Load(); got != laps*lineBoxes {
		t.Fatalf("published count %d, want %d", got, laps*lineBoxes)
	}
	if err := b.Poll(); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Unexpected != 0 {
		t.Fatalf("receiver found %d messages after the last: a stale box read as new", st.Unexpected)
	}
}

// TestLineBoxesInterleave: line boxes, fastboxes and cells carry one
// pair's messages in its one sequence, so two senders' mixes of short,
// medium and long messages reach a wildcard receiver each in its order.
func TestLineBoxesInterleave(t *testing.T) {
	eps := joinLocal(t, 3, &Options{CellSize: 512})
	sizes := []int{8, 3000, 8, linePayload + 1, 0, 8, 1500, linePayload, 8, 8}
	var msgs [2][][]byte
	for src := range 2 {
		for i, n := range sizes {
			msgs[src] = append(msgs[src], pattern(n, 10*src+i))
		}
		sendAll(t, eps[src], 2, msgs[src])
		// The 1500-byte message, sixth in sequence, finds the fastbox of
		// its number holding the third: it waits its hold out and goes
		// by cells, as the 3000-byte one does.
		if st := eps[src].Stats(); st.LineMsgs != 7 || st.FastboxMsgs != 8 || st.QueueMsgs != 2 {
			t.Fatalf("rank %d stats %+v: want 7 line boxes, 1 fastbox, 2 by cells", src, st)
		}
	}
	next := [2]int{}
	buf := make([]byte, 4000)
	for range 2 * len(sizes) {
		st, err := eps[2].Recv(AnySource, AnyTag, buf)
		if err != nil {
			t.Fatal(err)
		}
		want := msgs[st.Source][next[st.Source]]
		if st.Tag != next[st.Source] || !bytes.Equal(buf[:st.Count], want) {
			t.Fatalf("from %d: tag %d, %d bytes; want tag %d, %d bytes intact", st.Source, st.Tag, st.Count, next[st.Source], len(want))
		}
		next[st.Source]++
	}
}

// TestCorruptLineBox: a line box whose header lies is refused with
// ErrCorrupt, and a consumed count ahead of what was sent reads as a full
// ring: the sender overwrites no box its receiver has not consumed.
func TestCorruptLineBox(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(l *lineBox)
	}{
		{"length", func(l *lineBox) { l.hdr.len = linePayload + 1; l.hdr.total = linePayload + 1 }},
		{"kind", func(l *lineBox) { l.hdr.kind = kindRTS }},
		{"total", func(l *lineBox) { l.hdr.total = 1 << 20 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			eps := joinLocal(t, 2, nil)
			if err := eps[0].Send(1, 0, []byte("x")); err != nil {
				t.Fatal(err)
			}
			c.mutate(&eps[1].peers[0].lnIn.box[0])
			if _, err := eps[1].Recv(0, 0, make([]byte, 8)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
	t.Run("count", func(t *testing.T) {
		eps := joinLocal(t, 2, nil)
		a, b := eps[0], eps[1]
		msgs := smallMsgs(lineBoxes+1, 8, 3)
		sendAll(t, a, 1, msgs[:lineBoxes])
		b.peers[0].lnIn.done.Store(1000)
		if err := a.Send(1, lineBoxes, msgs[lineBoxes]); err != nil {
			t.Fatal(err)
		}
		if st := a.Stats(); st.LineMsgs != lineBoxes {
			t.Fatalf("stats %+v: a line box taken on a count ahead of the sends", st)
		}
		recvInOrder(t, b, 0, msgs)
	})
}

// TestIrecvTakesLineBox: a receive that the next message of its source,
// waiting in a line box, matches, and that no earlier posted receive
// precedes, takes it at once, truncation included; a receive that an
// earlier one precedes leaves the message to that one.
func TestIrecvTakesLineBox(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	buf0, buf1 := make([]byte, 8), make([]byte, 8)
	var first, second Request
	if err := b.Irecv(&first, 0, 9, buf0); err != nil || first.Done() {
		t.Fatalf("Irecv before any message: done %v, %v", first.Done(), err)
	}
	sendAll(t, a, 1, [][]byte{[]byte("zero")})
	if err := b.Irecv(&second, 0, 0, buf1); err != nil || second.Done() {
		t.Fatalf("Irecv behind a posted receive: done %v, %v; want it posted", second.Done(), err)
	}
	if err := b.Poll(); err != nil || first.Done() || !second.Done() || string(buf1[:second.Status().Count]) != "zero" {
		t.Fatalf("after a Poll: first done %v, second done %v with %q (%v); want the second only", first.Done(), second.Done(), buf1, err)
	}
	if err := a.Send(1, 2, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if err := b.Irecv(&second, 0, AnyTag, buf1); err == nil && second.Done() {
		t.Fatalf("Irecv with a receive posted before it took the message")
	}
	if err := b.Wait(&second); err != nil || second.Status().Tag != 2 {
		t.Fatalf("second receive: %+v, %v", second.Status(), err)
	}
	if err := a.Send(1, 9, []byte("nine")); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(&first); err != nil || string(buf0[:first.Status().Count]) != "nine" {
		t.Fatalf("first receive: %q, %v", buf0, err)
	}
	var r Request
	if err := a.Send(1, 3, []byte("three")); err != nil {
		t.Fatal(err)
	}
	if err := b.Irecv(&r, 0, AnyTag, buf0); err != nil || !r.Done() || r.Status().Tag != 3 || string(buf0[:r.Status().Count]) != "three" {
		t.Fatalf("Irecv of a waiting line box: done %v, %+v, %q, %v; want it taken at once", r.Done(), r.Status(), buf0, err)
	}
	if err := a.Send(1, 4, []byte("four")); err != nil {
		t.Fatal(err)
	}
	if err := b.Irecv(&r, 0, 4, buf1[:2]); err != nil || !r.Done() || !errors.Is(r.err, ErrTruncated) || string(buf1[:2]) != "fo" {
		t.Fatalf("Irecv of a waiting line box into 2 bytes: done %v, %v, %q, %v; want it truncated at once", r.Done(), r.err, buf1[:2], err)
	}
	if st := b.Stats(); st.Unexpected != 0 || st.FastboxMsgs != 0 {
		t.Fatalf("receiver stats %+v: want no unexpected message", st)
	}
}
