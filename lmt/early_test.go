package lmt_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
)

// ringBytes is the default shm ring's capacity: what a sender can put in
// before its CTS.
const ringBytes = lmt.DefaultShmSlots * lmt.DefaultShmSlotSize

type sent struct {
	tr  *lmt.Transfer
	rts []byte
	msg []byte
}

// sendEarly starts a message of n bytes (pattern seed) and lets the sender
// alone progress, as it does while its RTS travels.
func sendEarly(t *testing.T, l *loop, n, seed int) sent {
	t.Helper()
	m := make([]byte, n)
	lmttest.Fill(m, seed)
	rts := make([]byte, 4096)
	tr, k, err := l.engs[0].StartSend(1, [][]byte{m}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 * lmt.DefaultShmSlots {
		if err := l.engs[0].Progress(); err != nil {
			t.Fatal(err)
		}
	}
	return sent{tr, rts[:k], m}
}

func recvInto(t *testing.T, l *loop, s sent, buf []byte) *lmt.Transfer {
	t.Helper()
	tr, err := l.engs[1].StartRecv(0, s.rts, [][]byte{buf})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestEarlyFillKept: a sender fills the ring before its CTS, up to the
// ring's capacity, and the receiver takes those bytes as the message's
// first ones.
func TestEarlyFillKept(t *testing.T) {
	for _, n := range []int{1, 65536 + 3, ringBytes, 1<<20 + 5} {
		l := newLoop(t, "shm")
		s := sendEarly(t, l, n, n)
		early := int64(min(n, ringBytes))
		if got := s.tr.Moved(); got != early {
			t.Fatalf("%d bytes: sender moved %d before the CTS, want %d", n, got, early)
		}
		buf := make([]byte, n)
		r := recvInto(t, l, s, buf)
		l.wait(t, s.tr, r)
		if s.tr.Err() != nil || r.Err() != nil || !bytes.Equal(buf, s.msg) {
			t.Fatalf("%d bytes: %v, %v, payload equal %v", n, s.tr.Err(), r.Err(), bytes.Equal(buf, s.msg))
		}
		if st := s.tr.Stats(); st.Early != early || st.Bytes != int64(n) {
			t.Errorf("%d bytes: sender stats %+v, want Early %d", n, st, early)
		}
	}
}

// TestEarlyFillRevoked: the receiver matches a later message first. It must
// skip the ring slots the earlier message filled early, and that message,
// told at its CTS, starts over: both arrive intact.
func TestEarlyFillRevoked(t *testing.T) {
	l := newLoop(t, "shm")
	first := sendEarly(t, l, 1<<20+11, 1)
	if first.tr.Moved() != ringBytes {
		t.Fatalf("first message moved %d early, want the ring's %d", first.tr.Moved(), ringBytes)
	}
	// A second live transfer stops early filling: the second message's
	// slots must all come after the first one's.
	second := sendEarly(t, l, 65536+17, 2)
	if second.tr.Moved() != 0 {
		t.Fatalf("second message moved %d early, want 0 while the first is live", second.tr.Moved())
	}
	buf2 := make([]byte, len(second.msg))
	r2 := recvInto(t, l, second, buf2)
	l.wait(t, second.tr, r2)
	buf1 := make([]byte, len(first.msg))
	r1 := recvInto(t, l, first, buf1)
	l.wait(t, first.tr, r1)
	for i, c := range []struct {
		s   sent
		r   *lmt.Transfer
		buf []byte
	}{{first, r1, buf1}, {second, r2, buf2}} {
		if c.s.tr.Err() != nil || c.r.Err() != nil || !bytes.Equal(c.buf, c.s.msg) {
			t.Errorf("message %d: %v, %v, payload equal %v", i+1, c.s.tr.Err(), c.r.Err(), bytes.Equal(c.buf, c.s.msg))
		}
		if e := c.s.tr.Stats().Early; e != 0 {
			t.Errorf("message %d: Early = %d, want 0 (discarded or never filled)", i+1, e)
		}
	}
	// The ring is in order again: the next message fills early and keeps it.
	third := sendEarly(t, l, 4097, 3)
	buf3 := make([]byte, 4097)
	r3 := recvInto(t, l, third, buf3)
	l.wait(t, third.tr, r3)
	if !bytes.Equal(buf3, third.msg) || third.tr.Stats().Early != 4097 {
		t.Errorf("third message: payload equal %v, stats %+v", bytes.Equal(buf3, third.msg), third.tr.Stats())
	}
}

// TestEarlyFillTruncated: the sender filled more than the receiver's buffer
// holds. Nothing is written past the buffer, and the slots left in the ring
// do not leak into the next message.
func TestEarlyFillTruncated(t *testing.T) {
	l := newLoop(t, "shm")
	const guard = 64
	big := sendEarly(t, l, 200<<10, 5)
	mem := make([]byte, 50<<10+1+guard)
	for i := range mem {
		mem[i] = 0xa5
	}
	buf := mem[: 50<<10+1 : 50<<10+1]
	r := recvInto(t, l, big, buf)
	l.wait(t, big.tr, r)
	var te *lmt.TruncationError
	if !errors.As(r.Err(), &te) || te.Len != 200<<10 || te.Cap != 50<<10+1 {
		t.Fatalf("receiver: %v, want a TruncationError 204800 > 51201", r.Err())
	}
	if !bytes.Equal(buf, big.msg[:len(buf)]) {
		t.Error("truncated payload differs from the message's start")
	}
	for i, b := range mem[len(buf):] {
		if b != 0xa5 {
			t.Fatalf("guard byte %d overwritten", i)
		}
	}
	next := sendEarly(t, l, 300<<10+1, 6)
	buf2 := make([]byte, len(next.msg))
	r2 := recvInto(t, l, next, buf2)
	l.wait(t, next.tr, r2)
	if next.tr.Err() != nil || r2.Err() != nil || !bytes.Equal(buf2, next.msg) {
		t.Errorf("next message: %v, %v, payload equal %v", next.tr.Err(), r2.Err(), bytes.Equal(buf2, next.msg))
	}
}

// TestEarlyFillBehindCommitted: once the receiver has granted a message and
// its sender has pushed every byte, the next message fills the ring behind
// it; a message started later and matched first makes the receiver skip
// those early slots, and the skipped message starts over.
func TestEarlyFillBehindCommitted(t *testing.T) {
	l := newLoop(t, "shm")
	x := sendEarly(t, l, 96<<10, 1) // fits the ring: all of it early
	bufX := make([]byte, len(x.msg))
	rX := recvInto(t, l, x, bufX)
	// Deliver the CTS to the sender only: it has pushed everything, the
	// receiver has not read a byte yet.
	for len(l.queue[0]) > 0 {
		p := l.queue[0][0]
		l.queue[0] = l.queue[0][1:]
		if err := l.engs[0].HandleControl(1, p); err != nil {
			t.Fatal(err)
		}
	}
	y := sendEarly(t, l, 512<<10+1, 2)
	if want := int64(ringBytes - 96<<10); y.tr.Moved() != want {
		t.Fatalf("message behind a committed one moved %d early, want the %d bytes of room", y.tr.Moved(), want)
	}
	z := sendEarly(t, l, 70000, 3)
	if z.tr.Moved() != 0 {
		t.Fatalf("third message moved %d early while the second was filling", z.tr.Moved())
	}
	bufZ, bufY := make([]byte, len(z.msg)), make([]byte, len(y.msg))
	rZ := recvInto(t, l, z, bufZ)
	rY := recvInto(t, l, y, bufY)
	l.wait(t, x.tr, rX, y.tr, rY, z.tr, rZ)
	for i, c := range []struct {
		s     sent
		r     *lmt.Transfer
		buf   []byte
		early int64
	}{{x, rX, bufX, 96 << 10}, {y, rY, bufY, 0}, {z, rZ, bufZ, 0}} {
		if c.s.tr.Err() != nil || c.r.Err() != nil || !bytes.Equal(c.buf, c.s.msg) {
			t.Errorf("message %d: %v, %v, payload equal %v", i+1, c.s.tr.Err(), c.r.Err(), bytes.Equal(c.buf, c.s.msg))
		}
		if e := c.s.tr.Stats().Early; e != c.early {
			t.Errorf("message %d: Early = %d, want %d", i+1, e, c.early)
		}
	}
}
