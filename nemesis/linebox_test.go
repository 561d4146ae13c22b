package nemesis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"
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

// lineFit is how many messages of n bytes an empty line ring holds.
func lineFit(n int) int {
	if n > linePayload {
		return 0
	}
	return lineSlots / int(lineRecordSlots(n))
}

// TestLineRingTakesSmallMessages: messages of up to lineShort bytes take
// one slot of the pair's line ring, longer ones up to linePayload two,
// until the ring is full; the next goes by fastbox, as does any longer
// message; the receiver gets all in order, intact.
func TestLineRingTakesSmallMessages(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	sizes := []int{0, 1, 8, lineShort, lineShort + 1, linePayload} // 8 slots
	var msgs [][]byte
	for i := range lineSlots / 8 * len(sizes) {
		msgs = append(msgs, pattern(sizes[i%len(sizes)], i))
	}
	lines := uint64(len(msgs))
	sendAll(t, a, 1, msgs)
	if st := a.Stats(); st.LineMsgs != lines || st.FastboxMsgs != lines || st.Cells != 0 {
		t.Fatalf("stats after %d short messages: %+v, want all in the line ring", lines, st)
	}
	if got := a.peers[1].lnSent; got != lineSlots {
		t.Fatalf("slots filled: %d, want %d", got, lineSlots)
	}
	msgs = append(msgs, pattern(1, 99), pattern(linePayload+1, 98))
	for i := len(msgs) - 2; i < len(msgs); i++ {
		if err := a.Send(1, i, msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); st.LineMsgs != lines || st.FastboxMsgs != lines+2 || st.Cells != 0 {
		t.Fatalf("stats with the ring full: %+v, want 2 more by fastbox", st)
	}
	recvInOrder(t, b, 0, msgs)
}

// TestLineRingPacksTwoToALine: the records of two messages of up to
// lineShort bytes share a line; a longer message's record takes two slots
// and its continuation is stamped with its own running number, so that a
// stale continuation never reads as a record's head.
func TestLineRingPacksTwoToALine(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	msgs := [][]byte{pattern(8, 1), pattern(lineShort, 2), pattern(40, 3)}
	sendAll(t, a, 1, msgs)
	r := a.peers[1].lnOut
	want := []struct {
		stamp uint32
		head  bool
		seq   uint32
		n     int
	}{{1, true, 0, 8}, {2, true, 1, lineShort}, {3, true, 2, 40}, {4, false, 0, 0}}
	for i, w := range want {
		h := r.head(uint32(i))
		if got := h.stamp.Load(); got != w.stamp {
			t.Fatalf("slot %d stamped %d, want %d", i, got, w.stamp)
		}
		if w.head && (h.seq != w.seq || h.tag != int32(w.seq) || int(h.len) != w.n) {
			t.Fatalf("slot %d heads seq %d, tag %d, %d bytes; want seq %d, %d bytes", i, h.seq, h.tag, h.len, w.seq, w.n)
		}
	}
	if got := uintptr(unsafe.Pointer(r.at(1))) - uintptr(unsafe.Pointer(r.at(0))); got != lineSize/2 {
		t.Fatalf("two records %d bytes apart, want half a line", got)
	}
	recvInOrder(t, b, 0, msgs)
}

// TestLineRingPublishEveryHalfRing: the receiver publishes its count of
// consumed slots each time it passes a multiple of lineRelease, not at
// each message: a sender finding the ring full goes by fastbox until that
// count moves; a two-slot record that straddles the multiple publishes
// the count past it.
func TestLineRingPublishEveryHalfRing(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	msgs := smallMsgs(lineSlots+2, 8, 1)
	sendAll(t, a, 1, msgs[:lineSlots])
	recvInOrder(t, b, 0, msgs[:lineRelease-1])
	if got := a.peers[1].lnOut.done.Load(); got != 0 {
		t.Fatalf("count published after %d messages: %d, want 0", lineRelease-1, got)
	}
	if err := a.Send(1, lineSlots, msgs[lineSlots]); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.LineMsgs != lineSlots || st.FastboxMsgs != lineSlots+1 {
		t.Fatalf("stats before the count moved: %+v, want the send by fastbox", st)
	}
	buf := make([]byte, 8)
	if st, err := b.Recv(0, lineRelease-1, buf); err != nil || !bytes.Equal(buf, msgs[lineRelease-1]) {
		t.Fatalf("receive %d: %+v %v", lineRelease-1, st, err)
	}
	if got := a.peers[1].lnOut.done.Load(); got != lineRelease {
		t.Fatalf("count published after %d messages: %d, want %d", lineRelease, got, lineRelease)
	}
	if err := a.Send(1, lineSlots+1, msgs[lineSlots+1]); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.LineMsgs != lineSlots+1 || st.FastboxMsgs != lineSlots+2 {
		t.Fatalf("stats after the count moved: %+v, want the send in the line ring", st)
	}
	for i := lineRelease; i < len(msgs); i++ {
		if st, err := b.Recv(0, AnyTag, buf); err != nil || st.Tag != i || !bytes.Equal(buf, msgs[i]) {
			t.Fatalf("receive %d: %+v %v", i, st, err)
		}
	}

	// 33 slots consumed, 14 one-slot records, then a two-slot one
	// at slots 47 and 48, which passes the multiple 48.
	more := append(smallMsgs(lineRelease-2, 8, 5), pattern(40, 6))
	for i, m := range more {
		if err := a.Send(1, i, m); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range more {
		got := make([]byte, 40)
		if st, err := b.Recv(0, i, got); err != nil || !bytes.Equal(got[:st.Count], m) {
			t.Fatalf("receive %d: %+v %v", i, st, err)
		}
	}
	if got, want := a.peers[1].lnOut.done.Load(), uint32(3*lineRelease+1); got != want {
		t.Fatalf("count published past a straddling record: %d, want %d", got, want)
	}
}

// TestLineRingLaps: over several laps of the ring, with the receiver
// behind by a few messages, one-slot and two-slot records alternate so
// that two-slot ones start at every slot, the last included (its
// continuation wraps to the ring's first slot); every message takes the
// ring and arrives intact, and the stamps of one lap never read as the
// next's.
func TestLineRingLaps(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	const laps = 6
	var msgs [][]byte
	for slots := 0; slots < laps*lineSlots; {
		n := []int{8, 24}[len(msgs)%2]
		msgs = append(msgs, pattern(n, len(msgs)))
		slots += int(lineRecordSlots(n))
	}
	buf := make([]byte, 24)
	recvd := 0
	for i, m := range msgs {
		if err := a.Send(1, i, m); err != nil {
			t.Fatal(err)
		}
		if i%5 != 4 && i != len(msgs)-1 {
			continue
		}
		for ; recvd <= i; recvd++ {
			if st, err := b.Recv(0, AnyTag, buf); err != nil || st.Tag != recvd || !bytes.Equal(buf[:st.Count], msgs[recvd]) {
				t.Fatalf("receive %d: %+v %v", recvd, st, err)
			}
		}
	}
	if st := a.Stats(); st.LineMsgs != uint64(len(msgs)) || st.Cells != 0 {
		t.Fatalf("sender stats %+v, want %d line records", st, len(msgs))
	}
	if got := a.peers[1].lnSent; got != laps*lineSlots {
		t.Fatalf("slots filled: %d, want %d", got, laps*lineSlots)
	}
	if err := b.Poll(); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Unexpected != 0 {
		t.Fatalf("receiver found %d messages after the last: a stale slot read as new", st.Unexpected)
	}
}

// TestLineRingStaleContinuation: a receiver waiting at a slot that was a
// continuation in the previous lap reads it as empty even when the
// payload it carried is what a head the receiver expects would hold:
// the payload never lies where a stamp is read.
func TestLineRingStaleContinuation(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	// The record at slots 1 and 2 carries, in its bytes 16 on, the
	// stamp, sequence number, tag and length of the head the receiver
	// will expect at running number 34, slot 2, 33 messages on.
	forged := pattern(linePayload, 0)
	for i, v := range []uint32{lineSlots + 3, 33, 7, 8} {
		binary.LittleEndian.PutUint32(forged[lineShort+4*i:], v)
	}
	batches := [][][]byte{
		{pattern(8, 1), forged},
		smallMsgs(lineRelease-3, 8, 2),
		smallMsgs(lineRelease+2, 8, 3),
	}
	for _, msgs := range batches {
		sendAll(t, a, 1, msgs)
		recvInOrder(t, b, 0, msgs)
	}
	if got := b.peers[0].lnRecv; got != lineSlots+2 {
		t.Fatalf("receiver at slot %d, want %d", got, lineSlots+2)
	}
	if st, ok, err := b.Iprobe(0, AnyTag); ok || err != nil {
		t.Fatalf("probe with nothing sent: %v, %+v, %v; want nothing", ok, st, err)
	}
	if st := b.Stats(); st.Unexpected != 0 {
		t.Fatalf("receiver stats %+v: a stale continuation read as a message", st)
	}
}

// TestLineRingInterleave: line records, fastboxes and cells carry one
// pair's messages in its one sequence, so two senders' mixes of short,
// medium and long messages reach a wildcard receiver each in its order.
func TestLineRingInterleave(t *testing.T) {
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
			t.Fatalf("rank %d stats %+v: want 7 line records, 1 fastbox, 2 by cells", src, st)
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

// TestCorruptLineRecord: a record whose header lies about its length, or
// whose continuation bears the wrong stamp, is refused with ErrCorrupt;
// a consumed count ahead of what was sent reads as a full ring: the
// sender overwrites no slot its receiver has not consumed.
func TestCorruptLineRecord(t *testing.T) {
	for _, c := range []struct {
		name   string
		n      int
		mutate func(r *lineRing)
		says   string
	}{
		{"length", 1, func(r *lineRing) { r.head(0).len = uint32(linePayload) + 1 }, "45 bytes (max 44)"},
		{"continuation", lineShort + 1, func(r *lineRing) { r.stamp(1).Store(lineSlots + 2) }, "continuation stamped 34, want 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			eps := joinLocal(t, 2, nil)
			if err := eps[0].Send(1, 0, pattern(c.n, 1)); err != nil {
				t.Fatal(err)
			}
			c.mutate(eps[1].peers[0].lnIn)
			_, err := eps[1].Recv(0, 0, make([]byte, linePayload))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v, want ErrCorrupt saying %q", err, c.says)
			}
		})
	}
	t.Run("count", func(t *testing.T) {
		eps := joinLocal(t, 2, nil)
		a, b := eps[0], eps[1]
		msgs := smallMsgs(lineSlots+1, 8, 3)
		sendAll(t, a, 1, msgs[:lineSlots])
		b.peers[0].lnIn.done.Store(1000)
		if err := a.Send(1, lineSlots, msgs[lineSlots]); err != nil {
			t.Fatal(err)
		}
		if st := a.Stats(); st.LineMsgs != lineSlots {
			t.Fatalf("stats %+v: a slot taken on a count ahead of the sends", st)
		}
		recvInOrder(t, b, 0, msgs)
	})
}

// TestIrecvTakesLineRecord: a receive that the next message of its
// source, waiting in a line record, matches, and that no earlier posted receive
// precedes, takes it at once, truncation included; a receive that an
// earlier one precedes leaves the message to that one.
func TestIrecvTakesLineRecord(t *testing.T) {
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
		t.Fatalf("Irecv of a waiting line record: done %v, %+v, %q, %v; want it taken at once", r.Done(), r.Status(), buf0, err)
	}
	if err := a.Send(1, 4, []byte("four")); err != nil {
		t.Fatal(err)
	}
	if err := b.Irecv(&r, 0, 4, buf1[:2]); err != nil || !r.Done() || !errors.Is(r.err, ErrTruncated) || string(buf1[:2]) != "fo" {
		t.Fatalf("Irecv of a waiting line record into 2 bytes: done %v, %v, %q, %v; want it truncated at once", r.Done(), r.err, buf1[:2], err)
	}
	if st := b.Stats(); st.Unexpected != 0 || st.FastboxMsgs != 0 {
		t.Fatalf("receiver stats %+v: want no unexpected message", st)
	}
}
