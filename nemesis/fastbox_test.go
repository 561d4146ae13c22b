package nemesis

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/knemesis/knemesis/nemesis/launch"
)

// joinSparse joins the given ranks of a job of size from this process and
// stands in for all the others: their pids (this process's) are recorded
// in the segment as if they had joined, and they never poll. A job of 192
// ranks then costs a handful of endpoints.
func joinSparse(tb testing.TB, size int, ranks []int, o *Options) map[int]*Endpoint {
	tb.Helper()
	if o == nil {
		o = &Options{}
	}
	job := launch.NewJobName()
	res := make(chan joined, len(ranks))
	for _, r := range ranks {
		go func() {
			ep, err := Join(job, r, size, o)
			res <- joined{r, ep, err}
		}()
	}
	if len(ranks) == size {
		return collect(tb, res, len(ranks))
	}
	// A rank stood in for is not joined yet: the name stays until it is.
	var s *segment
	for s == nil {
		var err error
		s, err = joinSegment("/dev/shm", job, o.layout(size), -1, 0, 100*time.Millisecond) // -1: the test stands in
		select {
		case j := <-res:
			if j.err != nil {
				tb.Fatalf("rank %d: %v", j.rank, j.err)
			}
			res <- j
		default:
		}
		if err != nil && !errors.Is(err, ErrJoinTimeout) {
			tb.Fatal(err)
		}
	}
	for r := range size {
		if !slices.Contains(ranks, r) {
			s.proc(r).pid.Store(int32(os.Getpid()))
			if int(s.hdr.joined.Add(1)) == size {
				s.unlink()
			}
		}
	}
	s.unmap()
	return collect(tb, res, len(ranks))
}

type joined struct {
	rank int
	ep   *Endpoint
	err  error
}

func collect(tb testing.TB, res chan joined, n int) map[int]*Endpoint {
	tb.Helper()
	eps := map[int]*Endpoint{}
	for range n {
		j := <-res
		if j.err != nil {
			tb.Fatal(j.err)
		}
		eps[j.rank] = j.ep
	}
	tb.Cleanup(func() {
		for _, ep := range eps {
			ep.Close()
		}
	})
	return eps
}

// TestFastboxClaimedAfterThreshold: in a job larger than the pool, the
// first fboxThreshold packets to a peer take cells, then the sender claims
// a set, announces it, and the rest go through fastboxes, all in order and
// intact; once its pool is used up, further peers stay on cells.
func TestFastboxClaimedAfterThreshold(t *testing.T) {
	eps := joinLocal(t, 4, &Options{CellSize: 512, Cells: 8, FastboxSize: 256, Fastboxes: 2})
	a := eps[0]
	const msgs = fboxThreshold + 8
	for dst := 1; dst < 4; dst++ {
		for i := range msgs {
			m := make([]byte, 1+i%100)
			stamp(m, dst, i)
			if err := a.Send(dst, i, m); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 200)
			st, err := eps[dst].Recv(0, i, buf)
			if err != nil || st.Count != len(m) || !bytes.Equal(buf[:st.Count], m) {
				t.Fatalf("message %d to rank %d: %v, %d bytes, intact %v", i, dst, err, st.Count, bytes.Equal(buf[:st.Count], m))
			}
		}
		st := a.Stats()
		wantSets := uint64(min(dst, 2))
		wantFbox := wantSets * (msgs - fboxThreshold)
		if st.FastboxSets != wantSets || st.FastboxMsgs != wantFbox || st.Cells != uint64(dst*msgs)-wantFbox+wantSets {
			t.Fatalf("after rank %d: %d sets, %d fastbox messages, %d cells; want %d, %d, %d",
				dst, st.FastboxSets, st.FastboxMsgs, st.Cells, wantSets, wantFbox, uint64(dst*msgs)-wantFbox+wantSets)
		}
		attached := dst <= 2
		if got := slices.Equal(eps[dst].fbActive, []int32{0}); got != attached {
			t.Fatalf("rank %d attached sets from %v, want rank 0's: %v", dst, eps[dst].fbActive, attached)
		}
	}
}

// TestFastboxSetAnnouncementChecked: an announcement naming a set outside
// the sender's pool fails the receiver with ErrCorrupt.
func TestFastboxSetAnnouncementChecked(t *testing.T) {
	eps := joinLocal(t, 4, &Options{CellSize: 512, Cells: 8, FastboxSize: 256, Fastboxes: 2})
	if ok, err := eps[0].sendCell(1, kindFboxSetup, 0, nil, 2); !ok || err != nil {
		t.Fatalf("sendCell: %v %v", ok, err)
	}
	if _, err := eps[1].Recv(0, 0, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Recv after an announcement of set 2 of 2: %v, want ErrCorrupt", err)
	}
}

// TestWildcardFindsFastboxByBell: with more attached sets than a wildcard
// receive scans, it finds a message in one Poll by its sender's bell bit,
// without scanning the sets.
func TestWildcardFindsFastboxByBell(t *testing.T) {
	const size = bellScanMax + 4
	eps := joinSparse(t, size, []int{0, 5}, nil)
	a, b := eps[5], eps[0]
	if len(b.fbActive) != size-1 {
		t.Fatalf("%d sets attached, want %d", len(b.fbActive), size-1)
	}
	var r Request
	buf := make([]byte, 16)
	if err := b.Irecv(&r, AnySource, AnyTag, buf); err != nil {
		t.Fatal(err)
	}
	if err := a.Send(0, 3, []byte("rung")); err != nil {
		t.Fatal(err)
	}
	if a.Stats().FastboxMsgs != 1 || b.bells[0].Load() != 1<<5 {
		t.Fatalf("sent %d through a fastbox, bell %#x; want 1 and bit 5", a.Stats().FastboxMsgs, b.bells[0].Load())
	}
	if err := b.Poll(); err != nil {
		t.Fatal(err)
	}
	st := r.Status()
	if !r.Done() || st.Source != 5 || string(buf[:st.Count]) != "rung" || b.Stats().FullFboxScans != 0 {
		t.Fatalf("after one Poll: done %v, %+v %q, %d scans; want the message from rank 5 and no scan", r.Done(), st, buf[:st.Count], b.Stats().FullFboxScans)
	}
	if b.bells[0].Load() != 0 {
		t.Fatalf("bell %#x after the receive, want it clear", b.bells[0].Load())
	}
}

// TestSparseJobPollsOnlyTalkers: in a job of 192 where two peers send, the
// receiver attaches their two sets and nothing else.
func TestSparseJobPollsOnlyTalkers(t *testing.T) {
	eps := joinSparse(t, scaleProcs, []int{0, 1, 2}, nil)
	talk(t, eps[0], eps[1], eps[2])
	if got := eps[0].fbActive; len(got) != 2 || !slices.Contains(got, 1) || !slices.Contains(got, 2) {
		t.Fatalf("rank 0 attached sets from %v, want ranks 1 and 2", got)
	}
}

// talk has each sender send rank 0 enough messages to claim a fastbox set.
func talk(tb testing.TB, ep *Endpoint, senders ...*Endpoint) {
	tb.Helper()
	for _, s := range senders {
		for i := range fboxThreshold + 4 {
			if err := s.Send(0, 1, []byte{byte(i)}); err != nil {
				tb.Fatal(err)
			}
			if _, err := ep.Recv(s.Rank(), 1, make([]byte, 1)); err != nil {
				tb.Fatal(err)
			}
		}
		if s.Stats().FastboxSets != 1 {
			tb.Fatalf("rank %d claimed %d fastbox sets, want 1", s.Rank(), s.Stats().FastboxSets)
		}
	}
}

// BenchmarkPollIdlePeers: the cost of one Poll that finds nothing, for a
// rank whose two talking peers have fastbox sets attached, in a job of 3
// and in a job of 192 (189 more peers, idle), with a receive posted for
// one of them or for AnySource; and, for the bell, in a job of 33 where
// all 32 peers have sets attached (a set per pair from the start).
func BenchmarkPollIdlePeers(b *testing.B) {
	for _, size := range []int{3, scaleProcs, DefaultFastboxes + 1} {
		eps := joinSparse(b, size, []int{0, 1, 2}, nil)
		ep := eps[0]
		if size > DefaultFastboxes+1 {
			talk(b, ep, eps[1], eps[2])
		}
		for _, src := range []int{1, AnySource} {
			name := fmt.Sprintf("peers=%d/attached=%d/src=%d", size-1, len(ep.fbActive), src)
			if src == AnySource {
				name = fmt.Sprintf("peers=%d/attached=%d/src=any", size-1, len(ep.fbActive))
			}
			b.Run(name, func(b *testing.B) {
				var r Request
				if err := ep.Irecv(&r, src, 2, nil); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := ep.Poll(); err != nil {
						b.Fatal(err)
					}
				}
				if r.Done() {
					b.Fatal("nothing was sent")
				}
				// Let the receive go: the next sub-benchmark posts its own.
				if err := eps[1].Send(0, 2, nil); err != nil {
					b.Fatal(err)
				}
				if err := ep.Wait(&r); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// TestJoinRefusesWhatShmCannotHold: a segment larger than /dev/shm's free
// space fails Join with a SpaceError naming both sizes and the fix, and
// leaves nothing behind.
func TestJoinRefusesWhatShmCannotHold(t *testing.T) {
	o := &Options{Cells: 1 << 16, CellSize: 1 << 15} // 512 GiB
	need, err := SegmentSize(256, o)
	if err != nil {
		t.Fatal(err)
	}
	job := launch.NewJobName()
	_, err = Join(job, 0, 256, o)
	var se *SpaceError
	if !errors.As(err, &se) || !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Join of a %d-byte segment: %v, want a SpaceError", need, err)
	}
	if se.Need != need || se.Free == 0 || se.Free >= need || se.Dir != "/dev/shm" {
		t.Fatalf("SpaceError %+v, want Need %d and the free space of /dev/shm", *se, need)
	}
	for _, s := range []string{sizeString(need), sizeString(se.Free), "--shm-size"} {
		if !bytes.Contains([]byte(err.Error()), []byte(s)) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if left, _ := filepath.Glob("/dev/shm/*" + job + "*"); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestSegmentSizeLinear: the segment grows by the same amount per rank
// (cells and fastbox sets), whatever the job size, up to page rounding.
func TestSegmentSizeLinear(t *testing.T) {
	perRank := uint64(DefaultCells*DefaultCellSize + DefaultFastboxes*(fboxSlots*DefaultFastboxSize+lineRingSize))
	for _, n := range []int{64, 128, 192, 512} {
		a, _ := SegmentSize(n, nil)
		b, _ := SegmentSize(2*n, nil)
		if grow := b - a; grow < uint64(n)*perRank || grow > uint64(n)*(perRank+1024)+3*4096 {
			t.Errorf("from %d to %d ranks the segment grows by %d bytes, want %d per rank (+ 1 KiB of headers)", n, 2*n, grow, perRank)
		}
	}
	small, _ := SegmentSize(3, nil)
	if want := uint64(3*DefaultCells*DefaultCellSize + 3*2*(fboxSlots*DefaultFastboxSize+lineRingSize)); small < want || small > want+5*4096 {
		t.Errorf("3 ranks: %d bytes, want %d (2 fastbox sets each) + headers", small, want)
	}
}

// TestBlockedReceiveDozes: a receive that waits long sleeps (futex) and is
// woken by the message.
func TestBlockedReceiveDozes(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	receiveAfterDoze(t, eps[1], eps[0], "wake up")
}

// receiveAfterDoze has `to` receive from `from` in a goroutine, sends msg
// once that receive dozes, and checks that it got msg after dozing.
func receiveAfterDoze(t *testing.T, to, from *Endpoint, msg string) {
	t.Helper()
	type result struct {
		msg   string
		dozes uint64
		err   error
	}
	done := make(chan result)
	go func() {
		buf := make([]byte, 16)
		st, err := to.Recv(from.Rank(), 0, buf)
		done <- result{string(buf[:st.Count]), to.Stats().Dozes, err}
	}()
	// Send once the receiver sleeps, not after a fixed pause a loaded
	// machine may not give it the time to reach its doze in. A rank that
	// set its sleep word checks for progress before it sleeps; the 20 ms
	// leave it past that check.
	for to.sleep.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if err := from.Send(to.Rank(), 0, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.msg != msg || r.dozes == 0 {
		t.Fatalf("Recv: %q, %v after %d dozes; want %q after dozing", r.msg, r.err, r.dozes, msg)
	}
}

// TestFastboxArrivalIsProgress: a Poll that takes a message from a fastbox
// moves the progress mark, as one that takes a cell does. A blocked call
// sleeps only after a Poll that left the mark alone; were a fastbox arrival
// not counted, the doze's own last Poll could take the very packet the call
// waits for and then sleep out its whole timeout (up to dozeMax) with it
// delivered: RMA's notification ping-pong stalled so.
func TestFastboxArrivalIsProgress(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	for i := range fboxThreshold + 4 { // past the threshold of a claim
		if err := eps[1].Send(0, 1, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := eps[0].Recv(1, 1, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
	var r Request
	buf := make([]byte, 8)
	if err := eps[0].Irecv(&r, 1, 7, buf); err != nil {
		t.Fatal(err)
	}
	before := eps[1].Stats().FastboxMsgs
	if err := eps[1].Send(0, 7, []byte("fastbox")); err != nil {
		t.Fatal(err)
	}
	if got := eps[1].Stats().FastboxMsgs - before; got != 1 {
		t.Fatalf("%d messages went through a fastbox, want 1", got)
	}
	mark := eps[0].progressMark()
	if err := eps[0].Poll(); err != nil {
		t.Fatal(err)
	}
	if !r.Done() || string(buf[:r.Status().Count]) != "fastbox" {
		t.Fatalf("after one Poll: done %v, %q; want the message", r.Done(), buf[:r.Status().Count])
	}
	if eps[0].progressMark() == mark {
		t.Fatal("the Poll that took a fastbox message left the progress mark unchanged")
	}
}

// TestIrecvTakesWaitingFastbox: a receive posted for a message already in
// its fastbox completes in Irecv, with no Poll and no unexpected copy;
// one posted for a message still to come stays pending.
func TestIrecvTakesWaitingFastbox(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	if err := a.Send(1, 5, append(make([]byte, linePayload), "waiting"...)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, linePayload+8)
	var r Request
	if err := b.Irecv(&r, 0, 5, buf); err != nil || !r.Done() || string(buf[linePayload:r.Status().Count]) != "waiting" {
		t.Fatalf("Irecv of a message in its fastbox: done %v, %q, %v", r.Done(), buf, err)
	}
	if err := b.Irecv(&r, 0, 5, buf); err != nil || r.Done() {
		t.Fatalf("Irecv of a message not sent yet: done %v, %v", r.Done(), err)
	}
	if err := a.Send(1, 5, append(make([]byte, linePayload), "later"...)); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(&r); err != nil || string(buf[linePayload:r.Status().Count]) != "later" {
		t.Fatalf("second receive: %q, %v", buf, err)
	}
	if st := b.Stats(); st.Unexpected != 0 {
		t.Fatalf("receiver stats %+v: want no unexpected message", st)
	}
}
