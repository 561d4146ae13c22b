package nemesis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/knemesis/knemesis/peerfault"
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
// lineShort bytes share a line; a longer message's record fills a line,
// the next one when its turn comes in a line's second slot, which then
// holds its fields; every slot is stamped with its own running number.
func TestLineRingPacksTwoToALine(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	msgs := [][]byte{pattern(8, 1), pattern(lineShort, 2), pattern(40, 3), pattern(8, 4), pattern(40, 5)}
	sendAll(t, a, 1, msgs)
	r := a.peers[1].lnOut
	const second = -1
	// What each slot holds: the fields of a message, or a record's
	// second slot.
	for i, what := range []int{0, 1, 2, second, 3, 4, 4, second} {
		if got := r.stamp(uint32(i)).Load(); got != uint32(i+1) {
			t.Fatalf("slot %d stamped %d, want %d", i, got, i+1)
		}
		f := r.fields(uint32(i))
		if what >= 0 && (f.seq != uint32(what) || f.tag != int32(what) || int(f.len) != len(msgs[what])) {
			t.Fatalf("slot %d has fields seq %d, tag %d, %d bytes; want message %d's", i, f.seq, f.tag, f.len, what)
		}
	}
	if got := r.payload(6, 40); !bytes.Equal(got, msgs[4]) || &got[0] != &r.slot[6][lineStampSize+lineFieldsSize] {
		t.Fatalf("message 4's record: %x, want %x from slot 6's payload on", got, msgs[4])
	}
	if got := a.peers[1].lnSent; got != 8 {
		t.Fatalf("slots filled: %d, want 8", got)
	}
	if got := uintptr(unsafe.Pointer(r.fields(1))) - uintptr(unsafe.Pointer(r.fields(0))); got != lineSize/2-lineStampSize {
		t.Fatalf("two records' fields %d bytes apart, want half a line less a stamp", got)
	}
	recvInOrder(t, b, 0, msgs)
}

// TestLineRingPublishEveryHalfRing: the receiver publishes its count of
// consumed slots each time it passes a multiple of lineRelease, not at
// each message: a sender finding the ring full goes by fastbox until that
// count moves; a two-slot record and the slot of its fields before it,
// which pass a multiple together, publish the count past both.
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

	// 33 slots consumed, 14 one-slot records, then a two-slot one,
	// whose fields take slot 47 and its record slots 48 and 49: they
	// pass the multiple 48 together.
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
	if got, want := a.peers[1].lnOut.done.Load(), uint32(3*lineRelease+2); got != want {
		t.Fatalf("count published past a two-slot record and its fields: %d, want %d", got, want)
	}
	if got, want := b.peers[0].lnRecv, uint32(3*lineRelease+2); got != want {
		t.Fatalf("receiver at slot %d, want %d: past the fields and the record", got, want)
	}
}

// TestLineRingLaps: over several laps of the ring, with the receiver
// behind by a few messages, one-slot and two-slot records mix so that a
// two-slot record starts at every even slot and the fields of one fall on
// odd slots before it, the ring's last included; every message takes the
// ring and arrives intact, the slots counted are exactly the records' and
// those fields', and the stamps of one lap never read as the next's.
func TestLineRingLaps(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	const laps = 6
	var msgs [][]byte
	slots, ahead := uint32(0), map[uint32]bool{}
	for slots < laps*lineSlots {
		n := []int{8, 24, 8, 24, 24}[len(msgs)%5]
		if n > lineShort && slots%2 == 1 {
			ahead[slots%lineSlots] = true
		}
		msgs = append(msgs, pattern(n, len(msgs)))
		slots += lineSlotsAt(slots, n)
	}
	if !ahead[lineSlots-1] {
		t.Fatalf("no fields ahead of a record in the ring's last slot: at %v", ahead)
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
	if got := a.peers[1].lnSent; got != slots {
		t.Fatalf("slots filled: %d, want %d", got, slots)
	}
	if got := b.peers[0].lnRecv; got != slots {
		t.Fatalf("slots consumed: %d, want %d", got, slots)
	}
	if err := b.Poll(); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Unexpected != 0 {
		t.Fatalf("receiver found %d messages after the last: a stale slot read as new", st.Unexpected)
	}
}

// TestLineRingStaleSecondSlot: a receiver waiting at a slot that was a
// two-slot record's second in the previous lap reads it as empty, though
// the payload the record carried there is the fields of the message the
// receiver expects next: that slot's stamp is of the previous lap.
func TestLineRingStaleSecondSlot(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	// The record at slots 2 and 3 (its fields also at 1) carries, in
	// its bytes 16 on, over slot 3's fields, the sequence number, tag
	// and length of the message the receiver will expect at running
	// number 35, slot 3, 33 messages on.
	forged := pattern(linePayload, 0)
	for i, v := range []uint32{33, 7, 8} {
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
	if got := b.peers[0].lnRecv; got != lineSlots+3 {
		t.Fatalf("receiver at slot %d, want %d", got, lineSlots+3)
	}
	if st, ok, err := b.Iprobe(0, AnyTag); ok || err != nil {
		t.Fatalf("probe with nothing sent: %v, %+v, %v; want nothing", ok, st, err)
	}
	if st := b.Stats(); st.Unexpected != 0 {
		t.Fatalf("receiver stats %+v: a stale second slot read as a message", st)
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

// TestCorruptLineRecord: a record whose fields claim more than a record
// holds, in either slot of a line, is refused with ErrCorrupt;
// a consumed count ahead of what was sent reads as a full ring: the
// sender overwrites no slot its receiver has not consumed.
func TestCorruptLineRecord(t *testing.T) {
	for _, slot := range []uint32{0, 1} {
		t.Run(fmt.Sprintf("length in slot %d", slot), func(t *testing.T) {
			eps := joinLocal(t, 2, nil)
			msgs := smallMsgs(int(slot)+1, 1, 1)
			sendAll(t, eps[0], 1, msgs)
			recvInOrder(t, eps[1], 0, msgs[:slot])
			eps[1].peers[0].lnIn.fields(slot).len = uint32(linePayload) + 1
			_, err := eps[1].Recv(0, AnyTag, make([]byte, linePayload))
			var pe *peerfault.Error
			if !errors.As(err, &pe) || !errors.Is(err, ErrCorrupt) || pe.Rank != 0 || pe.Field != "length of a line record" || pe.Value != linePayload+1 || pe.Limit != linePayload {
				t.Fatalf("got %v, want rank 0's corrupt length of a line record, 45 above 44", err)
			}
			if err := eps[1].Poll(); err != nil {
				t.Fatalf("Poll after rank 0 was failed: %v, want the endpoint to go on", err)
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

// TestLineRingRecordLists: the largest record's payload, which runs over
// its line's second slot's fields, is gathered from a list and arrives
// intact in a list, a buffer or a short buffer, whether the receive was
// posted first (the Poll delivers it) or comes after it (the receive
// takes it at once).
func TestLineRingRecordLists(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	msg := pattern(linePayload, 9)
	list := [][]byte{msg[:3], msg[3:23], {}, msg[23:]}
	for _, posted := range []bool{true, false} {
		for _, c := range []struct {
			name string
			iov  [][]byte
			want int
		}{
			{"list", [][]byte{make([]byte, 10), make([]byte, 30), make([]byte, 8)}, linePayload},
			{"buffer", [][]byte{make([]byte, linePayload)}, linePayload},
			{"short", [][]byte{make([]byte, lineShort+3)}, lineShort + 3},
		} {
			var r Request
			if posted {
				if err := b.Irecvv(&r, 0, 5, c.iov); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Sendv(1, 5, list); err != nil {
				t.Fatal(err)
			}
			if !posted {
				if err := b.Irecvv(&r, 0, 5, c.iov); err != nil || !r.Done() {
					t.Fatalf("%s: Irecvv of a waiting record: done %v, %v", c.name, r.Done(), err)
				}
			}
			err := b.Wait(&r)
			if c.want < linePayload && !errors.Is(err, ErrTruncated) || c.want == linePayload && err != nil {
				t.Fatalf("%s (posted %v): %v", c.name, posted, err)
			}
			if got := bytes.Join(c.iov, nil)[:c.want]; !bytes.Equal(got, msg[:c.want]) || r.Status().Count != c.want {
				t.Fatalf("%s (posted %v): %d bytes %x, want %x", c.name, posted, r.Status().Count, got, msg[:c.want])
			}
		}
	}
	if st := a.Stats(); st.LineMsgs != 6 || st.Cells != 0 {
		t.Fatalf("sender stats %+v: want 6 line records", st)
	}
}

// TestLinePayloadCoversNoStamp: the largest payload of a record, in every
// slot it may start at, writes neither a stamp nor outside its own line,
// so no payload byte is ever read as a stamp.
func TestLinePayloadCoversNoStamp(t *testing.T) {
	var r lineRing
	for at := range uint32(lineSlots) {
		size := lineShort
		if at%2 == 0 {
			size = linePayload
		}
		r = lineRing{}
		for n := range uint32(lineSlots) {
			r.stamp(n).Store(0xa5a5_0000 + n)
		}
		before := r.slot
		pl := r.payload(at, size)
		for i := range pl {
			pl[i] = 0xff
		}
		for n := range uint32(lineSlots) {
			if got := r.stamp(n).Load(); got != 0xa5a5_0000+n {
				t.Fatalf("payload of %d bytes at slot %d wrote slot %d's stamp: %#x", size, at, n, got)
			}
			if n/2 != at/2 && r.slot[n] != before[n] {
				t.Fatalf("payload of %d bytes at slot %d wrote slot %d, in another line", size, at, n)
			}
		}
	}
}
