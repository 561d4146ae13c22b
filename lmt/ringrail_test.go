package lmt_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/cma"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// guard is the byte the receive buffers of these tests hold around the
// message: one written there by a rail shows.
const guard = 0xa5

// guarded returns a receive area of n bytes with a page of guard bytes
// before it and extra after it, and the whole mapping.
func guarded(n, extra int) (got, all []byte) {
	all = make([]byte, 4096+n+extra)
	for i := range all {
		all[i] = guard
	}
	return all[4096:], all
}

// guardsHold fails unless all keeps its guard bytes outside [4096,
// 4096+n).
func guardsHold(all []byte, n int) error {
	for i, b := range all {
		if (i < 4096 || i >= 4096+n) && b != guard {
			return fmt.Errorf("byte %d outside the message (at %d) written: %#x", i, 4096, b)
		}
	}
	return nil
}

// TestRingRailPieces cuts a multirail-shm message over the read, write and
// ring rails, unmeasured (thirds) and by even and uneven measured speeds,
// one of them at the floor, at bytes that fall inside iovec entries on
// both sides, whose lists differ in shape and hold empty entries. Both
// sides report the exact bytes each rail moved, each side's CMA calls are
// those of its own piece alone (the ring makes none), every byte arrives
// and none is written outside the message; the receiver learns the three
// rails, the sender nothing.
func TestRingRailPieces(t *testing.T) {
	const n = 3<<20 + 12345
	msg := make([]byte, n)
	lmttest.Fill(msg, 11)
	send := [][]byte{msg[:5000], msg[5000 : 1<<20+7], nil, msg[1<<20+7 : 2<<20+300001], msg[2<<20+300001 : n-123], msg[n-123:]}
	for _, w := range []struct {
		read, write, ring float64
		readEnd, writeEnd int64 // the cut: its boundaries on pages
	}{
		{0, 0, 0, 1052672, 2105344},    // thirds of n: 1052691 each
		{1, 1, 1, 1052672, 2105344},    // the same, measured
		{3, 1, 2, 1576960, 2105344},    // n/2 = 1579036.5, n/6 = 526345.5
		{1, 2, 0.5, 901120, 2703360},   // 2n/7 = 902306.6, 4n/7 = 1804613.1
		{1, 1, 0.01, 1478656, 2957312}, // the ring at its floor n/16 = 197379, the rest in halves
	} {
		t.Run(fmt.Sprintf("%g:%g:%g", w.read, w.write, w.ring), func(t *testing.T) {
			l, _ := newRailLoop(t, lmt.MultiRailShm)
			lmt.SetRailRates(l.engs[1], 0, w.read, w.write)
			lmt.SetRailRate(l.engs[1], 0, lmt.RingRail, w.ring)
			got, all := guarded(n, 4096)
			recv := [][]byte{got[:777777], {}, got[777777 : 2<<20+4099], got[2<<20+4099 : n+100], got[n+100:]}
			for _, c := range []int64{w.readEnd, w.writeEnd} {
				if !insideEntry(send, c) || !insideEntry(recv, c) {
					t.Fatalf("cut %d falls on an entry boundary: the test must cross one", c)
				}
			}
			s, r := railMessage(t, l, send, recv)
			if s.Err() != nil || r.Err() != nil {
				t.Fatalf("send: %v, receive: %v", s.Err(), r.Err())
			}
			want := [lmt.NumRails]int64{lmt.ReadRail: w.readEnd, lmt.WriteRail: w.writeEnd - w.readEnd, lmt.RingRail: n - w.writeEnd}
			for _, tr := range []*lmt.Transfer{s, r} {
				if st := tr.Stats(); st.Rails != want || st.Bytes != n || st.Backend != lmt.MultiRailShm {
					t.Errorf("%v: %+v, want rails %v of %d bytes", tr, st, want, n)
				}
			}
			if rs, ss := r.Stats().Syscalls, s.Stats().Syscalls; rs != calls(want[lmt.ReadRail]) || ss != calls(want[lmt.WriteRail]) {
				t.Errorf("calls: receiver %d, sender %d; want %d and %d, one per chunk of its own CMA piece", rs, ss, calls(want[lmt.ReadRail]), calls(want[lmt.WriteRail]))
			}
			if err := lmttest.Check(got[:n], 11); err != nil {
				t.Error(err)
			}
			if err := guardsHold(all, n); err != nil {
				t.Error(err)
			}
			rates, sent := lmt.RailRates(l.engs[1], 0), lmt.RailRates(l.engs[0], 1)
			if rates[lmt.ReadRail] <= 0 || rates[lmt.WriteRail] <= 0 || rates[lmt.RingRail] <= 0 || rates[lmt.KnemRail] != 0 || sent != [lmt.NumRails]float64{} {
				t.Errorf("rates: receiver %v, sender %v; want read, write and ring measured by the receiver, none by the sender", rates, sent)
			}
		})
	}
}

// TestRingRailShort: a message under 256 KiB goes over the two CMA rails
// alone, and so does one whose sender's engine has no ring rail for that
// backend (multirail).
func TestRingRailShort(t *testing.T) {
	for _, c := range []struct {
		backend string
		n       int
	}{{lmt.MultiRailShm, 256<<10 - 1}, {lmt.MultiRail, 1 << 20}} {
		l, _ := newRailLoop(t, c.backend)
		msg := make([]byte, c.n)
		lmttest.Fill(msg, 3)
		got := make([]byte, c.n)
		s, r := railMessage(t, l, [][]byte{msg}, [][]byte{got})
		half := lmt.SplitPoint(int64(c.n))
		want := [lmt.NumRails]int64{lmt.ReadRail: half, lmt.WriteRail: int64(c.n) - half}
		if s.Err() != nil || r.Err() != nil || r.Stats().Rails != want || s.Stats().Rails != want {
			t.Errorf("%s, %d bytes: send %v %v, receive %v %v; want rails %v", c.backend, c.n, s.Err(), s.Stats().Rails, r.Err(), r.Stats().Rails, want)
		}
		if err := lmttest.Check(got, 3); err != nil {
			t.Error(err)
		}
	}
}

// TestRingRailCorruptChunk: midway through the ring's piece, the written
// counter of the rail's ring says more slots are filled than it holds.
// The receiver fails at its next Progress with a CorruptError naming the
// sender, the counter and the ring's piece; the sender fails with the
// receiver's exact words; nothing is left in /dev/shm, pinned or claimed
// in the sender's pool (some was midway), and the
// pair's next message goes over the two CMA rails, the ring given up.
func TestRingRailCorruptChunk(t *testing.T) {
	const n = 4 << 20
	const ringFrom, ringSlots = 2793472, lmt.DefaultShmSlots // thirds of 4 MiB, on pages
	pinned := pinsHeld(t)
	l, job := newRailLoop(t, lmt.MultiRailShm)
	msg := make([]byte, n)
	lmttest.Fill(msg, 5)
	got, all := guarded(n, 0)
	rts := make([]byte, 4096)
	s, k, err := l.engs[0].StartSend(1, [][]byte{msg}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.engs[1].StartRecv(0, rts[:k], [][]byte{got})
	if err != nil {
		t.Fatal(err)
	}
	// The receiver opened the rail's ring before its CTS.
	mem := mapRailRing(t, job)
	written := (*atomic.Uint64)(unsafe.Pointer(&mem[0]))
	read := (*atomic.Uint64)(unsafe.Pointer(&mem[128]))
	for range 2 {
		l.step(t)
	}
	if left := lmt.RingLeft(r); left <= 0 || left >= n-ringFrom {
		t.Fatalf("receiver's ring piece has %d bytes left of %d: the test must corrupt the ring midway", left, n-ringFrom)
	}
	if err := l.engs[0].Progress(); err != nil {
		t.Fatal(err)
	}
	if c := poolClaimed(t, job, 0); c == 0 {
		t.Fatal("no slot of the sender's pool in flight midway: the test must fail the ring while it holds some")
	}
	const bogus = 1 << 40
	rd := read.Load()
	written.Store(bogus)
	if err := l.engs[1].Progress(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("lmt: the ring rail's piece [%d, %d) with rank 0: knemesis: rank 0 wrote a corrupt written counter of the shm rail ring from rank 0 to rank 1: %d with %d read: not within the ring's %d slots ahead of it",
		ringFrom, n, uint64(bogus), rd, ringSlots)
	var ce *lmt.CorruptError
	if !r.Done() || !errors.As(r.Err(), &ce) || ce.Rank != 0 || r.Err().Error() != want {
		t.Fatalf("receiver done %v with %v\nwant %s", r.Done(), r.Err(), want)
	}
	l.wait(t, s)
	var remote *lmt.RemoteError
	if !errors.As(s.Err(), &remote) || remote.Rank != 1 || remote.Msg != want {
		t.Fatalf("sender: %v, want rank 1's error %s", s.Err(), want)
	}
	if err := guardsHold(all, n); err != nil {
		t.Error(err)
	}
	if m, _ := filepath.Glob("/dev/shm/*" + job + "*"); len(m) > 0 {
		t.Errorf("left in /dev/shm: %q", m)
	}
	if err := noPinsBeyond(pinned); err != nil {
		t.Error(err)
	}
	if c := poolClaimed(t, job, 0); c != 0 {
		t.Errorf("%d slots of the sender's pool still claimed after the failure", c)
	}
	// The ring is given up: the next message goes on the CMA rails.
	got2 := make([]byte, n)
	s, r = railMessage(t, l, [][]byte{msg}, [][]byte{got2})
	if s.Err() != nil || r.Err() != nil || r.Stats().Rails[lmt.RingRail] != 0 || r.Stats().Rails[lmt.ReadRail]+r.Stats().Rails[lmt.WriteRail] != n {
		t.Fatalf("after the failure: send %v, receive %v, rails %v; want the message on read and write alone", s.Err(), r.Err(), r.Stats().Rails)
	}
	if err := lmttest.Check(got2, 5); err != nil {
		t.Error(err)
	}
}

// poolClaimed counts the claimed slots of rank's shm pool in this
// process (job's ranks run here as engines of one process): the bits set
// in the bitmap that opens the memfd (internal/slotpool).
func poolClaimed(t *testing.T, job string, rank int) int {
	t.Helper()
	c, err := claimedSlots(job, rank)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func claimedSlots(job string, rank int) (int, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	want := fmt.Sprintf("/memfd:knemesis-%s-lmtpool-%d (deleted)", job, rank)
	for _, e := range ents {
		fd := "/proc/self/fd/" + e.Name()
		if target, err := os.Readlink(fd); err != nil || target != want {
			continue
		}
		f, err := os.Open(fd)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		bitmap := make([]byte, (lmt.DefaultShmPoolSlots+63)/64*8)
		if _, err := f.ReadAt(bitmap, 0); err != nil {
			return 0, err
		}
		n := 0
		for _, b := range bitmap {
			n += bits.OnesCount8(b)
		}
		return n, nil
	}
	return 0, fmt.Errorf("no memfd %s among this process's descriptors", want)
}

// mapRailRing maps the first page (counters and entries) of the rail's
// ring from rank 0 to rank 1 of job, as the engines did.
func mapRailRing(t *testing.T, job string) []byte {
	t.Helper()
	path := "/dev/shm/knemesis-" + job + "-rail-0-1"
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("the receiver's rail ring before its CTS: %v", err)
	}
	defer unix.Close(fd)
	mem, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return mem
}

// TestRingRailPeerDies: one rank of a two-process job dies midway through
// the ring's piece of a 64 MiB multirail-shm message. The survivor fails
// with a PeerError naming it, and leaves nothing in /dev/shm, before and
// after its Close, and no slot of its pool claimed. (The machine's pin
// count is read in TestRingRailCorruptChunk, by one process: the dead
// peer's pins are the kernel's to drop.)
func TestRingRailPeerDies(t *testing.T) {
	for _, dying := range []int{0, 1} {
		t.Run(fmt.Sprintf("rank%d", dying), func(t *testing.T) {
			job := lmttest.NewJob(2)
			launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Timeout: time.Minute, ExitEarly: []int{dying}}, func(p launch.Proc) error {
				return ringPeerDies(p, dying)
			})
		})
	}
}

func ringPeerDies(p launch.Proc, dying int) error {
	const size = 64 << 20
	ch, eng, err := lmttest.Open(p, lmt.MultiRailShm, nil)
	if err != nil {
		return err
	}
	b := lmttest.NewBuffer(size, 0, false)
	var tr *lmt.Transfer
	if p.Rank == 0 {
		rts := make([]byte, 4096)
		var n int
		if tr, n, err = eng.StartSend(1, b.Iov, lmt.MultiRailShm, rts); err != nil {
			return err
		}
		if err := ch.SendRTS(1, rts[:n]); err != nil {
			return err
		}
	} else {
		rts, err := ch.NextRTS(0)
		if err != nil {
			return err
		}
		if tr, err = eng.StartRecv(0, rts, b.Iov); err != nil {
			return err
		}
	}
	if p.Rank == dying {
		// Die once a few slots of the ring's piece (a third of the
		// message) went through.
		for left := lmt.RingLeft(tr); !tr.Done() && (left == 0 || left > size/3-1<<20); left = lmt.RingLeft(tr) {
			if err := ch.Step(); err != nil {
				return err
			}
		}
		if tr.Done() {
			return fmt.Errorf("rank %d completed before dying: %v", p.Rank, tr.Err())
		}
		os.Exit(0)
	}
	err = ch.Wait(tr)
	var pe *lmt.PeerError
	if !errors.As(err, &pe) || pe.Rank != dying || !errors.Is(err, lmt.ErrPeerGone) {
		return fmt.Errorf("rank %d after rank %d died: %v, want a PeerError naming it", p.Rank, dying, err)
	}
	if m, _ := filepath.Glob("/dev/shm/*" + p.Job + "*"); len(m) > 0 {
		return fmt.Errorf("after the PeerError, /dev/shm holds %q", m)
	}
	if c, err := claimedSlots(p.Job, p.Rank); err != nil || c != 0 {
		return fmt.Errorf("after the PeerError, %d slots of rank %d's pool claimed (%v)", c, p.Rank, err)
	}
	if err := eng.Close(); err != nil {
		return err
	}
	if m, _ := filepath.Glob("/dev/shm/*" + p.Job + "*"); len(m) > 0 {
		return fmt.Errorf("after Close, /dev/shm holds %q", m)
	}
	return nil
}

// TestRingRailNoAlloc: in steady state a multirail-shm message allocates
// nothing on either side, its ring piece included, cut by measured rails
// across iovec entries, the rails learned after each.
func TestRingRailNoAlloc(t *testing.T) {
	const n = 1<<20 + 4097
	ctl := &ringControl{}
	var engs [2]*lmt.Engine
	job := launch.NewJobName()
	for r := range engs {
		e, err := lmt.New(lmt.Config{Rank: r, Size: 2, Job: job, Control: ringEnd{ctl}, Backends: []lmt.Settings{cma.Settings{Chunk: railChunk}},
			Prefer: []string{lmt.MultiRailShm}, PeerPID: func(int) int { return os.Getpid() }})
		if err != nil {
			t.Fatal(err)
		}
		engs[r] = e
		t.Cleanup(func() { e.Close() })
	}
	lmt.SetRailRates(engs[1], 0, 3, 1)
	lmt.SetRailRate(engs[1], 0, lmt.RingRail, 2)
	msg, got := make([]byte, n), make([]byte, n)
	lmttest.Fill(msg, 8)
	send := [][]byte{msg[:300000], msg[300000 : n-5], msg[n-5:]}
	recv := [][]byte{got[:1<<19], got[1<<19 : n-70000], got[n-70000:]}
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
		rails := r.Stats().Rails
		if s.Err() != nil || r.Err() != nil || rails[lmt.RingRail] == 0 || rails[lmt.ReadRail]+rails[lmt.WriteRail]+rails[lmt.RingRail] != n {
			err = fmt.Errorf("send: %v, receive: %v, rails %v", s.Err(), r.Err(), rails)
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
		t.Errorf("%v allocations per multirail-shm message, want 0", allocs)
	}
	if err := lmttest.Check(got, 8); err != nil {
		t.Error(err)
	}
	if m, _ := filepath.Glob("/dev/shm/*" + job + "*"); len(m) > 0 {
		t.Errorf("left in /dev/shm after the messages: %q", m)
	}
}

// TestRingRailOneAtATime: three messages of a pair matched at once; the
// first holds the ring, the two others go over the CMA rails alone, and
// the next message, once the ring is free, has a ring piece again.
// Every byte of each arrives.
func TestRingRailOneAtATime(t *testing.T) {
	const n = 1 << 20
	l, _ := newRailLoop(t, lmt.MultiRailShm)
	var sends, recvs [3]*lmt.Transfer
	var gots [3][]byte
	msg := make([]byte, n)
	lmttest.Fill(msg, 21)
	for i := range sends {
		rts := make([]byte, 4096)
		s, k, err := l.engs[0].StartSend(1, [][]byte{msg}, "", rts)
		if err != nil {
			t.Fatal(err)
		}
		gots[i] = make([]byte, n)
		if recvs[i], err = l.engs[1].StartRecv(0, rts[:k], [][]byte{gots[i]}); err != nil {
			t.Fatal(err)
		}
		sends[i] = s
	}
	l.wait(t, append(sends[:], recvs[:]...)...)
	for i, r := range recvs {
		ring := r.Stats().Rails[lmt.RingRail]
		if sends[i].Err() != nil || r.Err() != nil || (ring > 0) != (i == 0) {
			t.Errorf("message %d: send %v, receive %v, rails %v; want a ring piece for the first alone", i, sends[i].Err(), r.Err(), r.Stats().Rails)
		}
		if err := lmttest.Check(gots[i], 21); err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
	got := make([]byte, n)
	if _, r := railMessage(t, l, [][]byte{msg}, [][]byte{got}); r.Err() != nil || r.Stats().Rails[lmt.RingRail] == 0 {
		t.Errorf("the next message: %v, rails %v; want a ring piece", r.Err(), r.Stats().Rails)
	}
	if err := lmttest.Check(got, 21); err != nil {
		t.Error(err)
	}
}

// The engine's shared tests on multirail-shm, with the shm backend's ring
// as its third rail (this package imports both).
func TestRingRailMatrix(t *testing.T)     { lmttest.RunMatrix(t, lmt.MultiRailShm, nil) }
func TestRingRailTruncation(t *testing.T) { lmttest.RunTruncation(t, lmt.MultiRailShm) }
func TestRingRailManyPairs(t *testing.T)  { lmttest.RunManyPairs(t, lmt.MultiRailShm) }

// TestRingRailCorruptCut: a CTS that gives the ring rail a piece the
// sender did not offer (a message under the ring's minimum), or one while
// another message to that rank holds the ring, fails the send with a
// CorruptError naming the ring rail, and the receiver is told; the
// message that holds the ring completes, and the ring serves the next.
func TestRingRailCorruptCut(t *testing.T) {
	l, _ := newRailLoop(t, lmt.MultiRailShm)
	start := func(n int, msg []byte) (s, r *lmt.Transfer) {
		t.Helper()
		rts := make([]byte, 4096)
		s, k, err := l.engs[0].StartSend(1, [][]byte{msg[:n]}, "", rts)
		if err != nil {
			t.Fatal(err)
		}
		if r, err = l.engs[1].StartRecv(0, rts[:k], [][]byte{make([]byte, n)}); err != nil {
			t.Fatal(err)
		}
		return s, r
	}
	// cts takes the CTS waiting for the sender; the cut follows its
	// 32-byte header, the write piece's end at 48.
	cts := func() []byte {
		t.Helper()
		if q := l.queue[0]; len(q) != 1 || lmt.PacketType(q[0]) != "CTS" {
			t.Fatalf("%d packets wait for the sender, want one CTS", len(q))
		}
		p := l.queue[0][0]
		l.queue[0] = l.queue[0][1:]
		return p
	}
	refused := func(s *lmt.Transfer, p []byte, want string) {
		t.Helper()
		if err := l.engs[0].HandleControl(1, p); err != nil {
			t.Fatal(err)
		}
		var ce *lmt.CorruptError
		if !s.Done() || !errors.As(s.Err(), &ce) || ce.Rank != 1 || s.Err().Error() != want {
			t.Fatalf("send done %v with %v, want %s", s.Done(), s.Err(), want)
		}
		if q := l.queue[1]; len(q) != 1 || lmt.PacketType(q[0]) != "DONE" || q[0][2] != 1 {
			t.Fatalf("rank 1 was sent %d packets, want one failed DONE", len(q))
		}
	}
	msg := make([]byte, 1<<20)
	lmttest.Fill(msg, 13)

	// 128 KiB: no ring offered; the cut is halves, the write piece to
	// the end.
	s, r := start(128<<10, msg)
	p := cts()
	binary.LittleEndian.PutUint64(p[48:], 96<<10)
	refused(s, p, "knemesis: rank 1 wrote a corrupt cut of a split CTS: a 32768-byte piece for the ring rail, which this sender did not offer")
	l.wait(t, r)

	// 1 MiB twice: the first holds the ring (thirds), the second is
	// cut in halves and its CTS rewritten to give the ring the last
	// quarter.
	s1, r1 := start(1<<20, msg)
	p1 := cts()
	s2, r2 := start(1<<20, msg)
	p2 := cts()
	if err := l.engs[0].HandleControl(1, p1); err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(p2[48:], 768<<10)
	refused(s2, p2, "knemesis: rank 1 wrote a corrupt cut of a split CTS: a 262144-byte piece for the ring rail, which another message to rank 1 holds")
	l.wait(t, s1, r1, r2)
	if s1.Err() != nil || r1.Err() != nil || r1.Stats().Rails[lmt.RingRail] != 1<<20-696320 {
		t.Fatalf("the message holding the ring: send %v, receive %v, rails %v", s1.Err(), r1.Err(), r1.Stats().Rails)
	}
	got := make([]byte, 1<<20)
	if s, r := railMessage(t, l, [][]byte{msg}, [][]byte{got}); s.Err() != nil || r.Err() != nil || r.Stats().Rails[lmt.RingRail] == 0 {
		t.Fatalf("the next message: send %v, receive %v, rails %v; want a ring piece", s.Err(), r.Err(), r.Stats().Rails)
	}
	if err := lmttest.Check(got, 13); err != nil {
		t.Error(err)
	}
}

// TestRingRailCorruptOffer: an RTS whose ring offer word is neither 0 nor
// 1 fails the receive with a CorruptError naming the sender and the
// field, and the sender is told.
func TestRingRailCorruptOffer(t *testing.T) {
	const n = 1 << 20
	l, _ := newRailLoop(t, lmt.MultiRailShm)
	rts := make([]byte, 4096)
	s, k, err := l.engs[0].StartSend(1, [][]byte{make([]byte, n)}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	// The offer is the first word after the 32-byte header.
	if v := binary.LittleEndian.Uint64(rts[32:]); v != 1 {
		t.Fatalf("ring offer %d, want 1 for a 1 MiB message", v)
	}
	binary.LittleEndian.PutUint64(rts[32:], 2)
	r, err := l.engs[1].StartRecv(0, rts[:k], [][]byte{make([]byte, n)})
	if err != nil {
		t.Fatal(err)
	}
	want := "knemesis: rank 0 wrote a corrupt ring offer of a split RTS: 2, neither 0 nor 1"
	var ce *lmt.CorruptError
	if !r.Done() || !errors.As(r.Err(), &ce) || ce.Rank != 0 || r.Err().Error() != want {
		t.Fatalf("receive done %v with %v, want %s", r.Done(), r.Err(), want)
	}
	l.wait(t, s)
	var remote *lmt.RemoteError
	if !errors.As(s.Err(), &remote) || remote.Msg != want {
		t.Fatalf("sender: %v, want rank 1's error %s", s.Err(), want)
	}
}
