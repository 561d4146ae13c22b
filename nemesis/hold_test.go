package nemesis

import (
	"fmt"
	"testing"
	"time"
)

// boxMsgLen is the length of the messages of these tests: one past a line
// record's payload, so that they take the fastboxes (the line ring holds
// its messages as linebox_test.go says).
const boxMsgLen = linePayload + 1

// fillBoxes sends fboxSlots messages of boxMsgLen bytes from a to rank 1,
// tags 0.., which fill the pair's fastboxes while rank 1 does not poll.
func fillBoxes(t *testing.T, a *Endpoint, msgs [][]byte) {
	t.Helper()
	for i := range fboxSlots {
		if err := a.Send(1, i, msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); st.FastboxMsgs != fboxSlots || st.Cells != 0 {
		t.Fatalf("stats after filling the boxes: %+v", st)
	}
}

// TestHoldLeavesByFastbox: a lone small send whose fastbox is full waits
// in its window, not complete, and leaves through the fastbox once the
// receiver has emptied it: no cell is used.
func TestHoldLeavesByFastbox(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	msgs := smallMsgs(fboxSlots+1, boxMsgLen, 3)
	fillBoxes(t, a, msgs)
	var s Request
	if err := a.Isend(&s, 1, fboxSlots, msgs[fboxSlots]); err != nil {
		t.Fatal(err)
	}
	if err := a.Poll(); err != nil || s.Done() {
		t.Fatalf("send to a full fastbox: done %v after a Poll (%v), want it held", s.Done(), err)
	}
	buf := make([]byte, boxMsgLen)
	if st, err := b.Recv(0, 0, buf); err != nil || st.Tag != 0 {
		t.Fatalf("first receive: %+v, %v", st, err)
	}
	if err := a.Wait(&s); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.FastboxMsgs != fboxSlots+1 || st.Cells != 0 || st.QueueMsgs != 0 {
		t.Fatalf("sender stats %+v: want %d fastbox messages and no cell", st, fboxSlots+1)
	}
	for i := 1; i < len(msgs); i++ {
		if st, err := b.Recv(0, AnyTag, buf); err != nil || st.Tag != i || string(buf) != string(msgs[i]) {
			t.Fatalf("receive %d: %+v, %v", i, st, err)
		}
	}
}

// holdClockAt makes the holds of the rest of the test read the time from
// *now, which only the test moves.
func holdClockAt(t *testing.T, now *int64) {
	saved := holdClock
	holdClock = func() int64 { return *now }
	t.Cleanup(func() { holdClock = saved })
}

// heldSend starts, on a clock held at *now, a send whose fastbox is full
// and that waits for it: the last of msgs, fboxSlots+1 messages of
// boxMsgLen bytes. A holds it; b receives.
func heldSend(t *testing.T, now *int64, seed int) (a, b *Endpoint, s *Request, msgs [][]byte) {
	t.Helper()
	holdClockAt(t, now)
	eps := joinLocal(t, 2, nil)
	a, b = eps[0], eps[1]
	msgs = smallMsgs(fboxSlots+1, boxMsgLen, seed)
	fillBoxes(t, a, msgs)
	s = new(Request)
	if err := a.Isend(s, 1, fboxSlots, msgs[fboxSlots]); err != nil || s.Done() {
		t.Fatalf("send to a full fastbox: done %v, %v; want it held", s.Done(), err)
	}
	return a, b, s, msgs
}

// goneByCell checks that the held send s left in one cell at the Poll
// just made (when, for the message) and that every message arrives in
// order.
func goneByCell(t *testing.T, a, b *Endpoint, s *Request, msgs [][]byte, when string, err error) {
	t.Helper()
	if err != nil || !s.Done() {
		t.Fatalf("%s: done %v (%v), want it gone by a cell", when, s.Done(), err)
	}
	if st := a.Stats(); st.QueueMsgs != 1 || st.Cells != 1 {
		t.Fatalf("sender stats %+v: want the held send in one cell", st)
	}
	recvInOrder(t, b, 0, msgs)
}

// TestHoldBounded: a receiver that does not poll keeps a held send for
// exactly holdPolls Polls of the sender once holdTime has passed; then it
// takes a cell and completes, and arrives in order.
func TestHoldBounded(t *testing.T) {
	var now int64
	a, b, s, msgs := heldSend(t, &now, 4)
	now += int64(holdTime)
	for i := 1; i < holdPolls; i++ {
		if err := a.Poll(); err != nil || s.Done() {
			t.Fatalf("Poll %d: done %v (%v), want it still held", i, s.Done(), err)
		}
	}
	goneByCell(t, a, b, s, msgs, fmt.Sprintf("Poll %d", holdPolls), a.Poll())
}

// TestHoldBoundedInTime: however many Polls pass, a held send waits until
// holdTime has passed since it began to wait, and takes a cell at the
// first Poll after.
func TestHoldBoundedInTime(t *testing.T) {
	var now int64
	a, b, s, msgs := heldSend(t, &now, 9)
	for i := 1; i <= 10*holdPolls; i++ {
		if i == 5*holdPolls {
			now += int64(holdTime) - 1
		}
		if err := a.Poll(); err != nil || s.Done() {
			t.Fatalf("Poll %d, %v after the hold began: done %v (%v), want it still held", i, time.Duration(now), s.Done(), err)
		}
	}
	now++
	goneByCell(t, a, b, s, msgs, "first Poll at holdTime", a.Poll())
}

// TestHoldReleasedByFollower: a send queued behind a held one sends it
// by cells at the next Poll, and is held in its turn; every message
// arrives in order.
func TestHoldReleasedByFollower(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	msgs := smallMsgs(fboxSlots+2, boxMsgLen, 5)
	fillBoxes(t, a, msgs)
	var s [2]Request
	for i := range s {
		if err := a.Isend(&s[i], 1, fboxSlots+i, msgs[fboxSlots+i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Poll(); err != nil {
		t.Fatal(err)
	}
	if !s[0].Done() || s[1].Done() {
		t.Fatalf("after a Poll: first done %v, second done %v; want the first sent by its follower, the second held", s[0].Done(), s[1].Done())
	}
	if st := a.Stats(); st.QueueMsgs != 1 {
		t.Fatalf("sender stats %+v: want one message by cells", st)
	}
	recvInOrder(t, b, 0, msgs[:fboxSlots+1])
	if err := a.Wait(&s[1]); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, boxMsgLen)
	if st, err := b.Recv(0, AnyTag, buf); err != nil || st.Tag != fboxSlots+1 || string(buf) != string(msgs[fboxSlots+1]) {
		t.Fatalf("last receive: %+v, %v", st, err)
	}
}

// TestHoldReleasedByClose: a send held when its sender closes still
// reaches the receiver.
func TestHoldReleasedByClose(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	msgs := smallMsgs(fboxSlots+1, boxMsgLen, 6)
	fillBoxes(t, a, msgs)
	var s Request
	if err := a.Isend(&s, 1, fboxSlots, msgs[fboxSlots]); err != nil {
		t.Fatal(err)
	}
	if s.Done() {
		t.Fatal("send to a full fastbox done at once, want it held")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !s.Done() || s.err != nil {
		t.Fatalf("held send after Close: done %v, %v", s.Done(), s.err)
	}
	recvInOrder(t, b, 0, msgs)
}

// TestHoldBacksOff: once a held send has run out of its wait, the next
// holdBackoff sends to that rank that find their fastbox full take cells
// at once, and the one after them waits again.
func TestHoldBacksOff(t *testing.T) {
	eps := joinLocal(t, 2, &Options{Cells: 2 * holdBackoff}) // the receiver polls only at the end
	a, b := eps[0], eps[1]
	msgs := smallMsgs(fboxSlots+holdBackoff+2, boxMsgLen, 7)
	fillBoxes(t, a, msgs)
	var s Request
	if err := a.Isend(&s, 1, fboxSlots, msgs[fboxSlots]); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(&s); err != nil {
		t.Fatal(err)
	}
	for i := fboxSlots + 1; i < len(msgs)-1; i++ {
		if err := a.Isend(&s, 1, i, msgs[i]); err != nil || !s.Done() {
			t.Fatalf("send %d after a wait ran out: done %v (%v), want it gone by cells at once", i, s.Done(), err)
		}
	}
	last := len(msgs) - 1
	if err := a.Isend(&s, 1, last, msgs[last]); err != nil || s.Done() {
		t.Fatalf("send %d, past the back-off: done %v (%v), want it held", last, s.Done(), err)
	}
	if st := a.Stats(); st.QueueMsgs != holdBackoff+1 {
		t.Fatalf("sender stats %+v: want %d messages by cells", st, holdBackoff+1)
	}
	if err := a.Wait(&s); err != nil {
		t.Fatal(err)
	}
	recvInOrder(t, b, 0, msgs)
}

// TestHoldBackOffEndsWhenConsumed: a receiver seen consuming the pair's
// line ring again ends the back-off a run-out wait began: the next send
// that finds the ring and its fastbox full waits for them instead of
// taking a cell, and every message arrives in order.
func TestHoldBackOffEndsWhenConsumed(t *testing.T) {
	var now int64
	holdClockAt(t, &now)
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	msgs := smallMsgs(lineSlots+fboxSlots+2+lineRelease+1, 8, 10)
	next := 0
	send := func() *Request {
		r := new(Request)
		if err := a.Isend(r, 1, next, msgs[next]); err != nil {
			t.Fatal(err)
		}
		next++
		return r
	}
	for range lineSlots + fboxSlots {
		if r := send(); !r.Done() {
			t.Fatalf("send %d with room in the ring or a fastbox: not done", next-1)
		}
	}
	held := send()
	now += int64(holdTime)
	for range holdPolls {
		if err := a.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if r := send(); !held.Done() || !r.Done() {
		t.Fatalf("after the wait ran out: held send done %v, next done %v; want both gone by cells", held.Done(), r.Done())
	}
	if st := a.Stats(); st.LineMsgs != lineSlots || st.QueueMsgs != 2 {
		t.Fatalf("sender stats %+v: want %d line records and 2 messages by cells", st, lineSlots)
	}
	recvInOrder(t, b, 0, msgs[:lineRelease])
	for range lineRelease {
		if r := send(); !r.Done() {
			t.Fatalf("send %d into the boxes the receiver freed: not done", next-1)
		}
	}
	last := send()
	if last.Done() {
		t.Fatal("send to a full ring and fastbox after the receiver consumed: done at once, want it held (back-off over)")
	}
	if st := a.Stats(); st.LineMsgs != lineSlots+lineRelease || st.QueueMsgs != 2 {
		t.Fatalf("sender stats %+v: want %d line records and still 2 messages by cells", st, lineSlots+lineRelease)
	}
	buf := make([]byte, 16)
	for i := lineRelease; i < len(msgs); i++ {
		st, err := b.Recv(0, AnyTag, buf)
		if err != nil || st.Tag != i || string(buf[:st.Count]) != string(msgs[i]) {
			t.Fatalf("receive %d: %+v, %v", i, st, err)
		}
		if _, err := a.Test(last); err != nil {
			t.Fatal(err)
		}
	}
	if !last.Done() {
		t.Fatal("the held send never left")
	}
}

// amLog records the active messages it is handed.
type amLog struct{ got []string }

func (l *amLog) HandleAM(src int, pkt []byte) error {
	l.got = append(l.got, string(pkt))
	return nil
}
func (l *amLog) Progress() error       { return nil }
func (l *amLog) PeerFailed(int, error) {}

// TestHoldReleasedByActiveMessage: an active message to a rank whose
// window holds a send waiting for its fastbox leaves at once, behind that
// send, which takes a cell: neither waits for the box.
func TestHoldReleasedByActiveMessage(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	msgs := smallMsgs(fboxSlots+1, boxMsgLen, 8)
	fillBoxes(t, a, msgs)
	var s Request
	if err := a.Isend(&s, 1, fboxSlots, msgs[fboxSlots]); err != nil || s.Done() {
		t.Fatalf("send to a full fastbox: done %v, %v; want it held", s.Done(), err)
	}
	if ok, err := a.SendAM(1, []byte("after the send")); !ok || err != nil {
		t.Fatalf("active message behind a held send: sent %v, %v; want it sent at once", ok, err)
	}
	if !s.Done() {
		t.Fatal("the held send is still waiting after an active message to its rank")
	}
	if st := a.Stats(); st.QueueMsgs != 1 || st.Cells != 2 {
		t.Fatalf("sender stats %+v: want the held send and the active message in a cell each", st)
	}
	recvInOrder(t, b, 0, msgs)
	var h amLog
	if err := b.SetAM(&h); err != nil {
		t.Fatal(err)
	}
	for len(h.got) == 0 {
		if err := b.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.got) != 1 || h.got[0] != "after the send" {
		t.Fatalf("active messages received: %q", h.got)
	}
}
