package lmt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/cma"
	"github.com/knemesis/knemesis/internal/await"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// railChunk is the CMA chunk (cma.Settings) of these tests: small, so that each rail
// makes several calls and a failure can come midway through a piece.
const railChunk = 64 << 10

// newRailLoop is a loop of two engines preferring backend, with railChunk
// calls, and returns the job's name.
func newRailLoop(t testing.TB, backend string) (*loop, string) {
	t.Helper()
	var job string
	l := newLoopConfigEach(t, lmt.Config{Prefer: []string{backend}, Backends: []lmt.Settings{cma.Settings{Chunk: railChunk}}}, func(_ int, c *lmt.Config) { job = c.Job })
	return l, job
}

// wantCut is the cut a receiver that measured the rails at read and
// write bytes/ns makes in an n-byte message: the read rail's share of the
// speed, on a page boundary; the half when either is unmeasured.
func wantCut(n int, read, write float64) int64 {
	if read == 0 || write == 0 {
		return lmt.SplitPoint(int64(n))
	}
	return int64(float64(n)*read/(read+write)) &^ 4095
}

// insideEntry reports whether byte off of iov falls strictly inside an
// entry, not on a boundary between two.
func insideEntry(iov [][]byte, off int64) bool {
	var at int64
	for _, b := range iov {
		if off > at && off < at+int64(len(b)) {
			return true
		}
		at += int64(len(b))
	}
	return false
}

func calls(n int64) int { return int((n + railChunk - 1) / railChunk) }

// TestMultiRailPieces cuts messages by 1:1 and uneven rail speeds (and
// unmeasured, which is 1:1) at a byte that falls inside an iovec entry on
// both sides, whose lists differ in shape and hold empty entries. Both
// sides report the exact bytes each rail moved, each side's calls are
// those of its own piece alone, and every byte arrives.
func TestMultiRailPieces(t *testing.T) {
	const n = 3<<20 + 12345
	msg := make([]byte, n)
	lmttest.Fill(msg, 9)
	send := [][]byte{msg[:5000], msg[5000 : 1<<20+7], nil, msg[1<<20+7 : 2<<20+300001], msg[2<<20+300001 : n-123], msg[n-123:]}
	for _, w := range []struct{ read, write float64 }{{0, 0}, {1, 1}, {3, 1}, {1, 5}, {0.7, 1.9}} {
		t.Run(fmt.Sprintf("%g:%g", w.read, w.write), func(t *testing.T) {
			l, _ := newRailLoop(t, lmt.MultiRail)
			lmt.SetRailRates(l.engs[1], 0, w.read, w.write)
			cut := wantCut(n, w.read, w.write)
			got := make([]byte, n+4096)
			recv := [][]byte{got[:777777], {}, got[777777 : 2<<20+4099], got[2<<20+4099 : n+100], got[n+100:]}
			if !insideEntry(send, cut) || !insideEntry(recv, cut) {
				t.Fatalf("cut %d falls on an entry boundary: the test must cross one", cut)
			}
			s, r := railMessage(t, l, send, recv)
			if s.Err() != nil || r.Err() != nil {
				t.Fatalf("send: %v, receive: %v", s.Err(), r.Err())
			}
			want := [lmt.NumRails]int64{lmt.ReadRail: cut, lmt.WriteRail: n - cut}
			for _, tr := range []*lmt.Transfer{s, r} {
				if st := tr.Stats(); st.Rails != want || st.Bytes != n || st.Backend != lmt.MultiRail {
					t.Errorf("%v: %+v, want rails %v of %d bytes", tr, st, want, n)
				}
			}
			if rs, ss := r.Stats().Syscalls, s.Stats().Syscalls; rs != calls(cut) || ss != calls(n-cut) {
				t.Errorf("calls: receiver %d, sender %d; want %d and %d, one per chunk of its own piece", rs, ss, calls(cut), calls(n-cut))
			}
			if err := lmttest.Check(got[:n], 9); err != nil {
				t.Error(err)
			}
			if tail := got[n:]; strings.Count(string(tail), "\x00") != len(tail) {
				t.Error("bytes written past the message")
			}
		})
	}
}

// railMessage moves one message from engine 0's send list to engine 1's
// receive list and returns both transfers once complete.
func railMessage(t *testing.T, l *loop, send, recv [][]byte) (s, r *lmt.Transfer) {
	t.Helper()
	rts := make([]byte, 4096)
	s, k, err := l.engs[0].StartSend(1, send, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	if r, err = l.engs[1].StartRecv(0, rts[:k], recv); err != nil {
		t.Fatal(err)
	}
	l.wait(t, s, r)
	return s, r
}

// TestMultiRailLearns: a multirail receiver learns both rails' speeds from
// its messages (its own piece's time, and the sender's in its DONE), the
// sender learns nothing, and cma-split keeps its half whatever was
// measured.
func TestMultiRailLearns(t *testing.T) {
	const n = 2 << 20
	msg := make([]byte, n)
	for _, b := range []string{lmt.MultiRail, lmt.CMASplit} {
		t.Run(b, func(t *testing.T) {
			l, _ := newRailLoop(t, b)
			if b == lmt.CMASplit {
				lmt.SetRailRates(l.engs[1], 0, 3, 1)
			}
			s, r := railMessage(t, l, [][]byte{msg}, [][]byte{make([]byte, n)})
			if s.Err() != nil || r.Err() != nil {
				t.Fatalf("send: %v, receive: %v", s.Err(), r.Err())
			}
			rates, sent := lmt.RailRates(l.engs[1], 0), lmt.RailRates(l.engs[0], 1)
			if rates[lmt.ReadRail] <= 0 || rates[lmt.WriteRail] <= 0 || sent != [lmt.NumRails]float64{} {
				t.Errorf("rates: receiver %v, sender %v; want both measured by the receiver, none by the sender", rates, sent)
			}
			half := [lmt.NumRails]int64{lmt.SplitPoint(n), n - lmt.SplitPoint(n)}
			if got := r.Stats().Rails; b == lmt.CMASplit && got != half {
				t.Errorf("cma-split with measured rails cut %v, want the half %v", got, half)
			}
		})
	}
}

// TestMultiRailFails: one rail fails midway through its piece (a page of
// it in the receive buffer is read-only): the side driving it fails with
// EFAULT, the other side with the peer's error, no page is left pinned
// and nothing of the job is left in /dev/shm.
func TestMultiRailFails(t *testing.T) {
	const n = 2 << 20
	msg := make([]byte, n)
	lmttest.Fill(msg, 4)
	for _, rail := range []lmt.Rail{lmt.ReadRail, lmt.WriteRail} {
		t.Run(rail.String(), func(t *testing.T) {
			pinned := pinsHeld(t)
			l, job := newRailLoop(t, lmt.MultiRail)
			lmt.SetRailRates(l.engs[1], 0, 1, 1)
			cut := wantCut(n, 1, 1)
			// The bad page lies three chunks into the failing
			// rail's piece.
			bad := cut + 3*railChunk + 100
			if rail == lmt.ReadRail {
				bad = 3*railChunk + 100
			}
			buf := readOnlyAt(t, n, bad)
			s, r := railMessage(t, l, [][]byte{msg}, [][]byte{buf})
			failed, other := r, s
			start, end := int64(0), cut
			if rail == lmt.WriteRail {
				failed, other, start, end = s, r, cut, n
			}
			var remote *lmt.RemoteError
			if !errors.Is(failed.Err(), unix.EFAULT) || !errors.As(other.Err(), &remote) || !strings.Contains(remote.Msg, "bad address") {
				t.Fatalf("failing side %v: %v; other side: %v; want EFAULT and the peer's error naming it", failed, failed.Err(), other.Err())
			}
			if m := failed.Moved(); m <= start || m >= end {
				t.Errorf("the failing rail stopped at byte %d, want midway through its piece [%d, %d)", m, start, end)
			}
			if err := lmttest.Check(buf[start:bad&^4095], 4+int(start)); err != nil {
				t.Errorf("the failing rail's piece before the bad page: %v", err)
			}
			if err := noPinsBeyond(pinned); err != nil {
				t.Error(err)
			}
			if m, _ := filepath.Glob("/dev/shm/*" + job + "*"); len(m) > 0 {
				t.Errorf("left in /dev/shm: %q", m)
			}
		})
	}
}

// readOnlyAt maps n bytes whose page holding byte off is read-only.
func readOnlyAt(t *testing.T, n int, off int64) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	if err := unix.Mprotect(b[off&^4095:off&^4095+4096], unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	return b
}

// pinsHeld returns how many pages the whole machine holds pinned with
// FOLL_PIN, which CMA pins the peer's pages with during each call: the
// fewest of a few readings, since other processes pin for a moment too,
// and never below zero: /proc/vmstat sums per-CPU counters that the
// kernel folds in about once a second, so a reading taken while another
// process pins and unpins on two CPUs can come out negative (-24 while
// the cma tests ran beside these), which no later reading would reach.
func pinsHeld(t *testing.T) int64 {
	t.Helper()
	least := int64(-1)
	for range 5 {
		v, err := pinCount()
		if err != nil {
			t.Fatal(err)
		}
		if least < 0 || v < least {
			least = max(v, 0)
		}
	}
	return least
}

// noPinsBeyond waits for the machine's pinned pages to come back to at
// most base: pins held for a moment by other processes come and go, a page
// this process left pinned stays. It fails only when the count stops
// moving for a whole stall interval (other jobs on a loaded host may pin
// and unpin for a long time; a leak stays still).
func noPinsBeyond(base int64) error {
	var v int64
	err := await.Poll{Stall: launchtest.DefaultTimeout, MinSleep: time.Millisecond, MaxSleep: 50 * time.Millisecond}.Until(context.Background(),
		func() (uint64, bool, error) {
			var err error
			v, err = pinCount()
			return uint64(v), v <= base, err
		})
	if err != nil {
		return fmt.Errorf("%d pages pinned, %d before the transfer: %w", v, base, err)
	}
	return nil
}

// pinCount is nr_foll_pin_acquired - nr_foll_pin_released in /proc/vmstat.
func pinCount() (int64, error) {
	s, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return 0, err
	}
	var acq, rel int64
	found := 0
	for _, line := range strings.Split(string(s), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "nr_foll_pin_acquired":
			acq, err = strconv.ParseInt(v, 10, 64)
			found++
		case "nr_foll_pin_released":
			rel, err = strconv.ParseInt(v, 10, 64)
			found++
		}
		if err != nil {
			return 0, err
		}
	}
	if found != 2 {
		return 0, errors.New("/proc/vmstat has no nr_foll_pin_acquired and nr_foll_pin_released (kernel older than 5.7)")
	}
	return acq - rel, nil
}

// TestSplitDoneWrongPiece: a DONE from the receiver claiming another piece
// than the cut gave its read rail fails the send with a CorruptError
// naming the peer and the field, and the receiver is told.
func TestSplitDoneWrongPiece(t *testing.T) {
	const n = 1 << 20
	l, _ := newRailLoop(t, lmt.MultiRail)
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
	if err := l.engs[0].HandleControl(1, l.queue[0][0]); err != nil {
		t.Fatal(err)
	}
	l.queue[0] = l.queue[0][1:]
	cut := lmt.SplitPoint(n)
	if err := l.engs[0].HandleControl(1, donePkt(5, s.ID(), cut+1)); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("knemesis: rank 1 wrote a corrupt DONE length of a split piece: %d bytes, the receiver's rails' pieces have %d", cut+1, cut)
	var ce *lmt.CorruptError
	if !s.Done() || !errors.As(s.Err(), &ce) || ce.Rank != 1 || s.Err().Error() != want {
		t.Fatalf("send done %v with %v, want %s", s.Done(), s.Err(), want)
	}
	if q := l.queue[1]; len(q) != 1 || lmt.PacketType(q[0]) != "DONE" || q[0][2] != 1 {
		t.Fatalf("rank 1 was sent %d packets, want one failed DONE", len(q))
	}
}

// BenchmarkMultiRailFollowsTheFasterRail: the side that gets four
// Progress calls for each of the other's moves its rail four chunks to
// the other's one, so the receiver measures that rail faster, and over a
// few messages the cut gives it the larger piece; which side is favoured
// follows which one is driven more, from the 1:1 seed. The rates are
// measured in wall time, which a loaded machine disturbs, so this is a
// figure (the favoured rail's share of the last cut), not a test: the cut
// itself is tested on given rates (TestCut, TestLearn).
func BenchmarkMultiRailFollowsTheFasterRail(b *testing.B) {
	const n = 4 << 20
	msg := make([]byte, n)
	got := make([]byte, n)
	for _, fast := range []int{0, 1} {
		b.Run(fmt.Sprintf("rank%d-driven-4x", fast), func(b *testing.B) {
			// The sender (rank 0) drives the write rail, the
			// receiver the read rail.
			faster := lmt.WriteRail
			if fast == 1 {
				faster = lmt.ReadRail
			}
			var share float64
			for range b.N {
				rails := followRails(b, fast, msg, got)
				share += float64(rails[faster]) / float64(n)
			}
			b.ReportMetric(share/float64(b.N), "faster-share")
		})
	}
}

// followRails sends 12 messages through a fresh multirail loop, driving
// engine fast 4 times as often, and returns the last cut.
func followRails(b *testing.B, fast int, msg, got []byte) [lmt.NumRails]int64 {
	l, _ := newRailLoop(b, lmt.MultiRail)
	var rails [lmt.NumRails]int64
	for range 12 {
		rts := make([]byte, 4096)
		s, k, err := l.engs[0].StartSend(1, [][]byte{msg}, "", rts)
		if err != nil {
			b.Fatal(err)
		}
		r, err := l.engs[1].StartRecv(0, rts[:k], [][]byte{got})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; !s.Done() || !r.Done(); i++ {
			if i > 1e6 {
				b.Fatal("transfers never completed")
			}
			l.stepUneven(b, fast, 4)
		}
		if s.Err() != nil || r.Err() != nil {
			b.Fatalf("send: %v, receive: %v", s.Err(), r.Err())
		}
		rails = r.Stats().Rails
	}
	return rails
}

// stepUneven is step with engine fast's Progress called times times for
// each of the other's.
func (l *loop) stepUneven(t testing.TB, fast, times int) {
	for r, e := range l.engs {
		for len(l.queue[r]) > 0 {
			p := l.queue[r][0]
			l.queue[r] = l.queue[r][1:]
			if err := e.HandleControl(1-r, p); err != nil {
				t.Fatal(err)
			}
		}
		calls := 1
		if r == fast {
			calls = times
		}
		for range calls {
			if err := e.Progress(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestMultiRailNoAlloc: in steady state a multirail message allocates
// nothing on either side, cut by measured rails across iovec entries,
// the rails learned after each: the control channel copies into fixed
// slots and the transfers are released for reuse.
func TestMultiRailNoAlloc(t *testing.T) {
	const n = 1<<20 + 4097
	ctl := &ringControl{}
	var engs [2]*lmt.Engine
	job := launch.NewJobName()
	for r := range engs {
		e, err := lmt.New(lmt.Config{Rank: r, Size: 2, Job: job, Control: ringEnd{ctl}, Backends: []lmt.Settings{cma.Settings{Chunk: railChunk}},
			Prefer: []string{lmt.MultiRail}, PeerPID: func(int) int { return os.Getpid() }})
		if err != nil {
			t.Fatal(err)
		}
		engs[r] = e
		t.Cleanup(func() { e.Close() })
	}
	lmt.SetRailRates(engs[1], 0, 3, 1)
	msg, got := make([]byte, n), make([]byte, n)
	lmttest.Fill(msg, 6)
	send := [][]byte{msg[:300000], msg[300000 : n-5], msg[n-5:]}
	recv := [][]byte{got[:1<<19], got[1<<19:]}
	rts := make([]byte, 512)
	var err error
	round := func() {
		s, k, e := engs[0].StartSend(1, send, "", rts)
		if e != nil {
			err = e
			return
		}
		r, e := engs[1].StartRecv(0, rts[:k], recv)
		if e != nil {
			err = e
			return
		}
		for !s.Done() || !r.Done() {
			ctl.deliver(t, &engs)
		}
		if s.Err() != nil || r.Err() != nil || r.Stats().Rails[lmt.ReadRail]+r.Stats().Rails[lmt.WriteRail] != n {
			err = fmt.Errorf("send: %v, receive: %v, rails %v", s.Err(), r.Err(), r.Stats().Rails)
		}
		engs[0].Release(s)
		engs[1].Release(r)
		ctl.deliver(t, &engs)
	}
	allocs := testing.AllocsPerRun(20, round)
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per multirail message, want 0", allocs)
	}
	if err := lmttest.Check(got, 6); err != nil {
		t.Error(err)
	}
}
