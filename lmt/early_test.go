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

// startSend starts sending m from rank 0 to rank 1 by the loop's backend.
func startSend(t *testing.T, l *loop, m []byte) sent {
	t.Helper()
	rts := make([]byte, 4096)
	tr, k, err := l.engs[0].StartSend(1, [][]byte{m}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	return sent{tr, rts[:k], m}
}

// sendEarly starts a message of n bytes (pattern seed) and lets the sender
// alone progress, as it does while its RTS travels.
func sendEarly(t *testing.T, l *loop, n, seed int) sent {
	t.Helper()
	m := make([]byte, n)
	lmttest.Fill(m, seed)
	s := startSend(t, l, m)
	driveSender(t, l)
	return s
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
		r, buf := receive(t, l, s)
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
	r2, buf2 := receive(t, l, second)
	// The first one's pieces lie ahead of the second's, skipped: it must
	// not add more behind them before its own CTS.
	driveSender(t, l)
	if got := first.tr.Moved(); got != ringBytes {
		t.Fatalf("first message moved %d before its CTS, want only its %d early bytes", got, ringBytes)
	}
	r1, buf1 := receive(t, l, first)
	delivered(t, "1", first, r1, buf1)
	delivered(t, "2", second, r2, buf2)
	for i, s := range []sent{first, second} {
		if e := s.tr.Stats().Early; e != 0 {
			t.Errorf("message %d: Early = %d, want 0 (discarded or never filled)", i+1, e)
		}
	}
	// The ring is in order again: the next message fills early and keeps it.
	third := sendEarly(t, l, 4097, 3)
	_, buf3 := receive(t, l, third)
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
	r2, buf2 := receive(t, l, next)
	delivered(t, "next", next, r2, buf2)
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

// TestEarlyFillPassedOn: a message started while an earlier one still fills
// the ring waits; the earlier one's CTS passes it the right, and it fills
// the ring behind the earlier one's bytes before its own CTS, so that a
// sender running ahead of its receiver keeps the channel full.
func TestEarlyFillPassedOn(t *testing.T) {
	l := newLoop(t, "shm")
	first := sendEarly(t, l, 1<<20+11, 1)
	second := sendEarly(t, l, 65536+17, 2)
	if second.tr.Moved() != 0 {
		t.Fatalf("second message moved %d early while the first was filling", second.tr.Moved())
	}
	r1, buf1 := receive(t, l, first)
	driveSender(t, l)
	if got := second.tr.Moved(); got != int64(len(second.msg)) {
		t.Fatalf("second message moved %d of %d before its CTS, want all", got, len(second.msg))
	}
	r2, buf2 := receive(t, l, second)
	delivered(t, "first", first, r1, buf1)
	delivered(t, "second", second, r2, buf2)
	if e := second.tr.Stats().Early; e != int64(len(second.msg)) {
		t.Errorf("second message: Early = %d, want all %d bytes", e, len(second.msg))
	}
}

// TestEarlyFillStream: a sender keeping two messages in flight and
// refilling each buffer with the next message as soon as its send
// completes, and a receiver matching them in order, two at a time. Every
// message arrives intact (a send that completed early must not have
// left bytes in the buffer it gave back), nothing stalls, and a good part
// of the messages were all in the ring before their CTS (this lockstep
// schedule matches each message about as soon as it is sent).
func TestEarlyFillStream(t *testing.T) {
	const n, msgs, window = 64<<10 + 3, 300, 2
	l := newLoop(t, "shm")
	var snd, rcv [window]*lmt.Transfer
	var src, dst [window][]byte
	var rts [msgs][]byte
	for k := range window {
		src[k], dst[k] = make([]byte, n), make([]byte, n)
	}
	sent, matched, received, fullyEarly := 0, 0, 0, 0
	for steps := 0; received < msgs; steps++ {
		if steps > 1e6 {
			t.Fatalf("stalled: %d sent, %d matched, %d received", sent, matched, received)
		}
		if k := sent % window; sent < msgs && (snd[k] == nil || snd[k].Done()) {
			if snd[k] != nil && snd[k].Stats().Early == n {
				fullyEarly++
			}
			lmttest.Fill(src[k], sent)
			buf := make([]byte, 4096)
			tr, m, err := l.engs[0].StartSend(1, [][]byte{src[k]}, "", buf)
			if err != nil {
				t.Fatal(err)
			}
			snd[k], rts[sent] = tr, buf[:m]
			sent++
		}
		if k := matched % window; matched < sent && rcv[k] == nil {
			tr, err := l.engs[1].StartRecv(0, rts[matched], [][]byte{dst[k]})
			if err != nil {
				t.Fatal(err)
			}
			rcv[k] = tr
			matched++
		}
		if k := received % window; rcv[k] != nil && rcv[k].Done() {
			if err := lmttest.Check(dst[k], received); err != nil || rcv[k].Err() != nil {
				t.Fatalf("message %d: %v, %v", received, err, rcv[k].Err())
			}
			rcv[k] = nil
			received++
		}
		l.step(t)
	}
	if fullyEarly < msgs/4 {
		t.Errorf("%d of %d messages were all in the ring before their CTS, want a good part", fullyEarly, msgs)
	}
}

// TestEarlyFillOneUncommitted: the ring names the sender whose pieces the
// receiver skipped in one word, so only one sender at a time may have early
// pieces awaiting their CTS. Here p fills early, q (sent later) is matched
// first, which ends p's filling, and the right passes to r: r must not fill
// while p's skipped pieces await p's CTS, or the receiver, skipping r's
// pieces after sending p's CTS, would overwrite the word that tells p to
// start over.
func TestEarlyFillOneUncommitted(t *testing.T) {
	l := newLoop(t, "shm")
	p := sendEarly(t, l, 64<<10+5, 1)
	q := sendEarly(t, l, 8<<10+1, 2)
	r := sendEarly(t, l, 16<<10+3, 3)
	if p.tr.Moved() != int64(len(p.msg)) || q.tr.Moved() != 0 || r.tr.Moved() != 0 {
		t.Fatalf("moved early: %d, %d, %d; want all of the first, none of the others", p.tr.Moved(), q.tr.Moved(), r.tr.Moved())
	}
	bufQ := make([]byte, len(q.msg))
	rQ := recvInto(t, l, q, bufQ)
	for range 16 {
		l.only(t, 0) // the sender alone: q's CTS, q's bytes, then r's chance
	}
	if got := r.tr.Moved(); got != 0 {
		t.Fatalf("r moved %d early while p's pieces awaited p's CTS", got)
	}
	l.wait(t, q.tr, rQ)
	bufP := make([]byte, len(p.msg))
	rP := recvInto(t, l, p, bufP)
	for range 16 {
		l.only(t, 1) // the receiver reads on before p's sender sees the CTS
	}
	l.wait(t, p.tr, rP)
	rR, bufR := receive(t, l, r)
	delivered(t, "p", p, rP, bufP)
	delivered(t, "q", q, rQ, bufQ)
	delivered(t, "r", r, rR, bufR)
}

// delivered checks that a message arrived intact, both sides without error.
func delivered(t *testing.T, name string, s sent, r *lmt.Transfer, buf []byte) {
	t.Helper()
	if s.tr.Err() != nil || r.Err() != nil || !bytes.Equal(buf, s.msg) {
		t.Errorf("message %s: %v, %v, payload equal %v", name, s.tr.Err(), r.Err(), bytes.Equal(buf, s.msg))
	}
}

// receive posts on rank 1 a receive of all of s and drives both ranks
// until s completes on both sides.
func receive(t *testing.T, l *loop, s sent) (*lmt.Transfer, []byte) {
	t.Helper()
	buf := make([]byte, len(s.msg))
	r := recvInto(t, l, s, buf)
	l.wait(t, s.tr, r)
	return r, buf
}

// driveSender runs rank 0's Progress alone, as a sender polling with no
// receiver reading: twice as many rounds as the ring has slots, enough to
// fill all the ring will take.
func driveSender(t *testing.T, l *loop) {
	t.Helper()
	for range 2 * lmt.DefaultShmSlots {
		if err := l.engs[0].Progress(); err != nil {
			t.Fatal(err)
		}
	}
}
