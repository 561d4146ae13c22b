package lmt_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
)

// These tests drive multirail-knem's third rail on any host: a fake
// Offloader, whose "kernel" is a goroutine copying the piece out of the
// sender's buffers, stands for knem's (kmod/knem/knemlmt's tests run the
// real one in the QEMU guests).

// fakeRail is an Offloader whose copies run on goroutines. Offer keeps the
// sender's buffers by key; a copy moves its piece, or half of it and then
// fails with errFakeCopy when fail is set, and ends once gate is closed
// (at once when gate is nil).
type fakeRail struct {
	regions   map[uint64][][]byte
	next      uint64
	copies    []*fakeCopy
	gate      chan struct{}
	fail      bool
	withdrawn []bool // Withdraw's used, by call
}

type fakeCopy struct {
	over atomic.Bool
	err  error
}

var errFakeCopy = errors.New("fake copy failed halfway")

func newFakeRail() *fakeRail { return &fakeRail{regions: map[uint64][][]byte{}} }

func (f *fakeRail) Offer(t *lmt.Transfer, dst []byte) (bool, error) {
	f.next++
	f.regions[f.next] = append([][]byte(nil), t.Buffers()...)
	binary.LittleEndian.PutUint64(dst, f.next)
	binary.LittleEndian.PutUint64(dst[8:], uint64(t.Len()))
	t.Offload().Key = f.next
	return true, nil
}

func (f *fakeRail) Accept(t *lmt.Transfer, offer []byte) error {
	key := binary.LittleEndian.Uint64(offer)
	if f.regions[key] == nil || int64(binary.LittleEndian.Uint64(offer[8:])) != t.MessageLen() {
		return lmt.Corrupt(t.Peer(), "fake offer", "key %d", key)
	}
	t.Offload().Key = key
	return nil
}

func (f *fakeRail) Copy(t *lmt.Transfer, from, n int64) error {
	var src []byte
	for _, b := range f.regions[t.Offload().Key] {
		src = append(src, b...)
	}
	src = src[from : from+n]
	local := t.BuffersAt(nil, from, from+n)
	c, gate, fail := &fakeCopy{}, f.gate, f.fail
	f.copies = append(f.copies, c)
	t.Offload().Flight = uint64(len(f.copies))
	go func() {
		if fail {
			src = src[:n/2]
		}
		for _, b := range local {
			src = src[copy(b, src):]
		}
		if gate != nil {
			<-gate
		}
		if fail {
			c.err = errFakeCopy
		}
		c.over.Store(true)
	}()
	return nil
}

func (f *fakeRail) Poll(t *lmt.Transfer) (bool, error) {
	st := t.Offload()
	c := f.copies[st.Flight-1]
	if !c.over.Load() {
		return false, nil
	}
	st.Flight = 0
	return true, c.err
}

func (f *fakeRail) Withdraw(t *lmt.Transfer, used bool) {
	f.withdrawn = append(f.withdrawn, used)
	delete(f.regions, t.Offload().Key)
}

// newOffloadLoop is newRailLoop on multirail-knem with f as the third
// rail of both engines.
func newOffloadLoop(t *testing.T, f *fakeRail) *loop {
	l, _ := newRailLoop(t, lmt.MultiRailKnem)
	for _, e := range l.engs {
		lmt.SetOffloader(e, lmt.MultiRailKnem, f)
	}
	return l
}

// offloadLen is the length of these tests' messages: 3 MiB + 12345.
const offloadLen = 3<<20 + 12345

// TestOffloadRailPieces cuts a message over the read, knem and write rails
// at bytes that fall inside iovec entries on both sides, unmeasured
// (thirds) and by uneven speeds. Both sides report the exact bytes of
// each rail, each side's calls are those of its CMA piece alone, every
// byte arrives and none past the message, the receiver measures the knem
// rail, and the sender withdraws its offer as used.
func TestOffloadRailPieces(t *testing.T) {
	const n = offloadLen
	msg := make([]byte, n)
	lmttest.Fill(msg, 5)
	send := [][]byte{msg[:5000], msg[5000 : 1<<20+7], nil, msg[1<<20+7 : 2<<20+300001], msg[2<<20+300001 : n-123], msg[n-123:]}
	for _, tc := range []struct {
		name               string
		read, knem, write  float64
		readEnd, writeFrom int64
	}{
		// Thirds of 3158073 bytes, each boundary down to its page.
		{"unmeasured", 0, 0, 0, 1052672, 2105344},
		{"1:1:1", 2, 2, 2, 1052672, 2105344},
		// A quarter and three quarters.
		{"read 1 knem 2 write 1", 1, 2, 1, 786432, 2367488},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRail()
			l := newOffloadLoop(t, f)
			for r, v := range map[lmt.Rail]float64{lmt.ReadRail: tc.read, lmt.KnemRail: tc.knem, lmt.WriteRail: tc.write} {
				lmt.SetRailRate(l.engs[1], 0, r, v)
			}
			got := make([]byte, n+4096)
			recv := [][]byte{got[:777777], {}, got[777777 : 2<<20+4099], got[2<<20+4099 : n+100], got[n+100:]}
			for _, b := range []int64{tc.readEnd, tc.writeFrom} {
				if !insideEntry(send, b) || !insideEntry(recv, b) {
					t.Fatalf("boundary %d falls on an entry boundary: the test must cross one", b)
				}
			}
			s, r := railMessage(t, l, send, recv)
			if s.Err() != nil || r.Err() != nil {
				t.Fatalf("send: %v, receive: %v", s.Err(), r.Err())
			}
			want := [lmt.NumRails]int64{lmt.ReadRail: tc.readEnd, lmt.KnemRail: tc.writeFrom - tc.readEnd, lmt.WriteRail: n - tc.writeFrom}
			for _, tr := range []*lmt.Transfer{s, r} {
				if st := tr.Stats(); st.Rails != want || st.Bytes != n || st.Backend != lmt.MultiRailKnem {
					t.Errorf("%v: %+v, want rails %v of %d bytes", tr, st, want, n)
				}
			}
			if rs, ss := r.Stats().Syscalls, s.Stats().Syscalls; rs != calls(tc.readEnd) || ss != calls(n-tc.writeFrom) {
				t.Errorf("calls: receiver %d, sender %d; want %d and %d, one per chunk of its CMA piece", rs, ss, calls(tc.readEnd), calls(n-tc.writeFrom))
			}
			if err := lmttest.Check(got[:n], 5); err != nil {
				t.Error(err)
			}
			if tail := got[n:]; strings.Count(string(tail), "\x00") != len(tail) {
				t.Error("bytes written past the message")
			}
			if rates := lmt.RailRates(l.engs[1], 0); rates[lmt.KnemRail] <= 0 || rates[lmt.ReadRail] <= 0 || rates[lmt.WriteRail] <= 0 {
				t.Errorf("rates after the message: %v, want every rail measured", rates)
			}
			if fmt.Sprint(f.withdrawn) != "[true]" || len(f.regions) != 0 {
				t.Errorf("offers withdrawn %v, %d left; want one, used by the receiver's copy", f.withdrawn, len(f.regions))
			}
		})
	}
}

// TestOffloadRailShort: a message shorter than the offload rail's minimum
// (256 KiB) gets no offer and goes over the two CMA rails.
func TestOffloadRailShort(t *testing.T) {
	const n = 256<<10 - 1
	f := newFakeRail()
	l := newOffloadLoop(t, f)
	msg, got := make([]byte, n), make([]byte, n)
	lmttest.Fill(msg, 8)
	s, r := railMessage(t, l, [][]byte{msg}, [][]byte{got})
	if s.Err() != nil || r.Err() != nil {
		t.Fatalf("send: %v, receive: %v", s.Err(), r.Err())
	}
	cut := lmt.SplitPoint(n)
	if want := [lmt.NumRails]int64{lmt.ReadRail: cut, lmt.WriteRail: n - cut}; r.Stats().Rails != want || f.next != 0 {
		t.Errorf("rails %v with %d offers, want %v and none", r.Stats().Rails, f.next, want)
	}
	if err := lmttest.Check(got, 8); err != nil {
		t.Error(err)
	}
}

// TestOffloadRailFails: one rail fails while the others move. The knem
// rail's copy failing halfway fails the receiver with its error and the
// sender with the receiver's; a CMA rail failing (a read-only page in its
// piece: EFAULT) while the knem copy still runs fails both sides, but the
// receiver completes only once the copy is over, since until then the
// "kernel" writes into its buffers. Every offer is withdrawn unused, and
// no page stays pinned.
func TestOffloadRailFails(t *testing.T) {
	const n = offloadLen
	const readEnd, writeFrom = 1052672, 2105344 // thirds, as above
	msg := make([]byte, n)
	lmttest.Fill(msg, 6)
	for _, rail := range []lmt.Rail{lmt.KnemRail, lmt.ReadRail, lmt.WriteRail} {
		t.Run(rail.String(), func(t *testing.T) {
			pinned := pinsHeld(t)
			f := newFakeRail()
			l := newOffloadLoop(t, f)
			var buf []byte
			switch rail {
			case lmt.KnemRail:
				f.fail = true
				buf = make([]byte, n)
			case lmt.ReadRail:
				f.gate = make(chan struct{})
				buf = readOnlyAt(t, n, 3*railChunk+100)
			case lmt.WriteRail:
				f.gate = make(chan struct{})
				buf = readOnlyAt(t, n, writeFrom+3*railChunk+100)
			}
			rts := make([]byte, 4096)
			s, k, err := l.engs[0].StartSend(1, [][]byte{msg}, "", rts)
			if err != nil {
				t.Fatal(err)
			}
			r, err := l.engs[1].StartRecv(0, rts[:k], [][]byte{buf})
			if err != nil {
				t.Fatal(err)
			}
			if f.gate != nil {
				// The failing CMA rail's side fails, and its
				// DONE fails the other; the receiver waits for
				// its copy in flight.
				for range 2000 {
					l.step(t)
				}
				if !s.Done() || r.Done() || l.engs[1].Pending() != 1 {
					t.Fatalf("with the knem copy in flight: send done %v (%v), receive done %v (%v), %d pending; want the send failed and the receive pending",
						s.Done(), s.Err(), r.Done(), r.Err(), l.engs[1].Pending())
				}
				close(f.gate)
			}
			l.wait(t, s, r)
			var remote *lmt.RemoteError
			switch rail {
			case lmt.KnemRail:
				want := fmt.Sprintf("lmt: the knem rail's piece [%d, %d) from rank 0: %v", readEnd, writeFrom, errFakeCopy)
				if !errors.Is(r.Err(), errFakeCopy) || r.Err().Error() != want || !errors.As(s.Err(), &remote) || remote.Msg != want {
					t.Fatalf("receive: %v; send: %v; want %s on both", r.Err(), s.Err(), want)
				}
				if err := lmttest.Check(buf[readEnd:readEnd+(writeFrom-readEnd)/2], 6+readEnd); err != nil {
					t.Errorf("the half the knem copy moved: %v", err)
				}
			case lmt.ReadRail:
				if !errors.Is(r.Err(), unix.EFAULT) || !errors.As(s.Err(), &remote) || !strings.Contains(remote.Msg, "bad address") {
					t.Fatalf("receive: %v; send: %v; want EFAULT and the peer's error naming it", r.Err(), s.Err())
				}
			case lmt.WriteRail:
				if !errors.Is(s.Err(), unix.EFAULT) || !errors.As(r.Err(), &remote) || !strings.Contains(remote.Msg, "bad address") {
					t.Fatalf("send: %v; receive: %v; want EFAULT and the peer's error naming it", s.Err(), r.Err())
				}
			}
			if fmt.Sprint(f.withdrawn) != "[false]" || len(f.regions) != 0 {
				t.Errorf("offers withdrawn %v, %d left; want one, unused", f.withdrawn, len(f.regions))
			}
			if err := noPinsBeyond(pinned); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestOffloadRailCorruptCut: a CTS giving the knem rail a piece the sender
// did not offer (a message of two rails, under the offload minimum) fails
// the send with a CorruptError naming the rail.
func TestOffloadRailCorruptCut(t *testing.T) {
	const n = 128 << 10
	f := newFakeRail()
	l := newOffloadLoop(t, f)
	rts := make([]byte, 4096)
	s, k, err := l.engs[0].StartSend(1, [][]byte{make([]byte, n)}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.engs[1].StartRecv(0, rts[:k], [][]byte{make([]byte, n)}); err != nil {
		t.Fatal(err)
	}
	if got := l.packetTypes(0); len(got) != 1 || got[0] != "CTS" {
		t.Fatalf("packets to the sender: %v, want [CTS]", got)
	}
	cts := l.queue[0][0]
	l.queue[0] = l.queue[0][1:]
	// The cut follows the 32-byte header: read to 16 KiB, knem to 48.
	binary.LittleEndian.PutUint64(cts[32:], 16<<10)
	binary.LittleEndian.PutUint64(cts[40:], 48<<10)
	if err := l.engs[0].HandleControl(1, cts); err != nil {
		t.Fatal(err)
	}
	want := "knemesis: rank 1 wrote a corrupt cut of a split CTS: a 32768-byte piece for the knem rail, which this sender did not offer"
	var ce *lmt.CorruptError
	if !s.Done() || !errors.As(s.Err(), &ce) || s.Err().Error() != want {
		t.Fatalf("send done %v with %v, want %s", s.Done(), s.Err(), want)
	}
}

// TestOffloadRailClose: an Engine closed while its receive's knem copy
// runs does not complete the receive over buffers still being written: it
// stays pending, and the first Progress once the copy is over completes
// it with ErrClosed.
func TestOffloadRailClose(t *testing.T) {
	f := newFakeRail()
	f.gate = make(chan struct{})
	l := newOffloadLoop(t, f)
	msg, got := make([]byte, offloadLen), make([]byte, offloadLen)
	rts := make([]byte, 4096)
	_, k, err := l.engs[0].StartSend(1, [][]byte{msg}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.engs[1].StartRecv(0, rts[:k], [][]byte{got})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; len(f.copies) == 0; i++ {
		if i > 1000 {
			t.Fatal("the knem copy never started")
		}
		l.step(t)
	}
	if err := l.engs[1].Close(); err != nil {
		t.Fatal(err)
	}
	if r.Done() || l.engs[1].Pending() != 1 {
		t.Fatalf("closed with the knem copy running: receive done %v (%v), %d pending; want it pending", r.Done(), r.Err(), l.engs[1].Pending())
	}
	close(f.gate)
	for i := 0; !r.Done(); i++ {
		if i > 1e6 {
			t.Fatal("the receive never completed after its copy ended")
		}
		if err := l.engs[1].Progress(); err != nil {
			t.Fatal(err)
		}
	}
	if !errors.Is(r.Err(), lmt.ErrClosed) || l.engs[1].Pending() != 0 {
		t.Fatalf("receive: %v, %d pending; want ErrClosed and none", r.Err(), l.engs[1].Pending())
	}
}

// TestOffloadRailRTSRoom: multirail-knem's RTS carries the offer ahead of
// the CMA handle, and a send whose RTS has room for the handle but not for
// both is refused, naming the room, instead of writing past it.
func TestOffloadRailRTSRoom(t *testing.T) {
	l, _ := newRailLoop(t, lmt.MultiRail)
	msg := make([]byte, offloadLen)
	send := [][]byte{msg[:1000], msg[1000:5000], msg[5000:]}
	_, plain, err := l.engs[0].StartSend(1, send, "", make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	l = newOffloadLoop(t, newFakeRail())
	if _, k, err := l.engs[0].StartSend(1, send, "", make([]byte, plain+lmt.OfferLen)); err != nil || k != plain+lmt.OfferLen {
		t.Fatalf("with room for the offer and the handle: %d bytes, %v; want %d", k, err, plain+lmt.OfferLen)
	}
	_, _, err = l.engs[0].StartSend(1, send, "", make([]byte, plain))
	if want := fmt.Sprintf("lmt: no backend available for rank 1: lmt: backend multirail-knem: 3 segments do not fit its handle (max 64, %d RTS bytes)", plain-32-lmt.OfferLen); err == nil || err.Error() != want {
		t.Fatalf("with room for the handle alone: %v, want %s", err, want)
	}
}
