package arena_test

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/arena"
	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// pair is two engines of one process, ranks 0 and 1 of a job of 3 (rank 2
// has an arena region but no engine: what is sent to it stays in flight),
// with an arena region each in ordinary memory and a control channel that
// queues packets until deliver: what a job's endpoints do, with every step
// in the test's hands.
type pair struct {
	eng     [2]*lmt.Engine
	region  [3][]byte
	used    [2]int // bump allocator over each region
	allocs  [2]int // Config.Alloc calls
	pkts    [3][][]byte
	pktBufs [3][160][512]byte
}

type pairControl struct {
	p    *pair
	from int
}

func (c pairControl) Send(dst int, pkt []byte) (bool, error) {
	q := &c.p.pkts[dst]
	if len(*q) == len(c.p.pktBufs[dst]) {
		return false, nil
	}
	b := c.p.pktBufs[dst][len(*q)][:len(pkt)]
	copy(b, pkt)
	*q = append(*q, b)
	return true, nil
}

func newPair(t testing.TB, regionSize int) *pair {
	p := &pair{}
	pid := os.Getpid()
	job := launch.NewJobName()
	p.region[2] = make([]byte, 4096)
	p.pkts[2] = make([][]byte, 0, len(p.pktBufs[2]))
	for r := range p.eng {
		p.region[r] = make([]byte, regionSize)
		p.pkts[r] = make([][]byte, 0, len(p.pktBufs[r]))
		e, err := lmt.New(lmt.Config{Rank: r, Size: 3, Job: job, Control: pairControl{p, r},
			Prefer:  []string{lmt.ArenaCopy},
			PeerPID: func(int) int { return pid },
			Arena:   func(rank int) []byte { return p.region[rank] },
			Alloc:   func(n int) ([]byte, error) { return p.alloc(r, n) },
		})
		if err != nil {
			t.Fatal(err)
		}
		p.eng[r] = e
		t.Cleanup(func() { e.Close() })
	}
	return p
}

func (p *pair) alloc(r, n int) ([]byte, error) {
	p.allocs[r]++
	if p.used[r]+n > len(p.region[r]) {
		return nil, errors.New("test arena full")
	}
	b := p.region[r][p.used[r] : p.used[r]+n : p.used[r]+n]
	p.used[r] += n
	return b, nil
}

// deliver hands each engine the packets queued for it, then progresses both.
func (p *pair) deliver(t testing.TB) {
	for r, e := range p.eng {
		for _, pkt := range p.pkts[r] {
			if err := e.HandleControl(1-r, pkt); err != nil {
				t.Fatal(err)
			}
		}
		p.pkts[r] = p.pkts[r][:0]
		if err := e.Progress(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestArenaCopyCompletesAtCopy: an arena-copy send completes for its user
// once its slot holds the message: the first 8 KiB piece in StartSend,
// then one piece a Progress, 7 more for 64 KiB, with no packet from the
// receiver, who has not even matched it. The receiver still gets the
// message as it was at the send (SHA-256), though the sender overwrote its
// buffers meanwhile, with no system call. Until the receiver's DONE the
// send stays in the engine's InChannel.
func TestArenaCopyCompletesAtCopy(t *testing.T) {
	p := newPair(t, 2<<20)
	msg := make([]byte, 64<<10)
	fill(msg, 3)
	want := sha256.Sum256(msg)
	iov := [][]byte{msg[:1000], nil, msg[1000:]}
	rts := make([]byte, 512)
	s, n, err := p.eng[0].StartSend(1, iov, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	progress := 0
	for ; !s.Done() && progress < 100; progress++ {
		if err := p.eng[0].Progress(); err != nil {
			t.Fatal(err)
		}
	}
	if progress != 7 || s.Err() != nil || s.Moved() != 64<<10 || p.eng[0].InChannel() != 1 {
		t.Fatalf("send done after %d Progress calls, err %v, %d bytes in the slot, %d in channel; want 7, nil, 65536, 1", progress, s.Err(), s.Moved(), p.eng[0].InChannel())
	}
	fill(msg, 4) // the user's buffer is the user's again
	got := make([]byte, len(msg))
	r, err := p.eng[1].StartRecv(0, rts[:n], [][]byte{got})
	if err != nil {
		t.Fatal(err)
	}
	for !r.Done() || p.eng[0].InChannel() > 0 {
		p.deliver(t)
	}
	st := r.Stats()
	if r.Err() != nil || sha256.Sum256(got) != want || st.Backend != lmt.ArenaCopy || st.Chunks != 1 || st.Syscalls != 0 {
		t.Fatalf("receive: err %v, checksum equal %v, stats %+v; want the message as sent, by %s in 1 chunk (the slot was full), no system call",
			r.Err(), sha256.Sum256(got) == want, st, lmt.ArenaCopy)
	}
	if p.allocs[0] != 1 {
		t.Errorf("sender took %d slots from the arena, want 1", p.allocs[0])
	}
}

// TestArenaCopyOverlaps: a receiver that matched at once copies each piece
// as the sender's Progress puts it in the slot, 8 KiB at a time, never
// more than the slot's header says it holds; a header that says more than
// the message, as a broken peer would write, fails the receive with a
// CorruptError naming it.
func TestArenaCopyOverlaps(t *testing.T) {
	p := newPair(t, 2<<20)
	msg := make([]byte, 24<<10)
	fill(msg, 6)
	rts := make([]byte, 512)
	s, n, err := p.eng[0].StartSend(1, [][]byte{msg}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	r, err := p.eng[1].StartRecv(0, rts[:n], [][]byte{got})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{8 << 10, 16 << 10, 16 << 10, 24 << 10, 24 << 10} {
		if i%2 == 1 {
			if err := p.eng[0].Progress(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.eng[1].Progress(); err != nil {
			t.Fatal(err)
		}
		if r.Moved() != want {
			t.Fatalf("step %d: receiver copied %d bytes, want %d", i, r.Moved(), want)
		}
	}
	for !r.Done() || p.eng[0].InChannel() > 0 {
		p.deliver(t)
	}
	if r.Err() != nil || s.Err() != nil || sha256.Sum256(got) != sha256.Sum256(msg) {
		t.Fatalf("receive: %v, send: %v, checksum equal %v", r.Err(), s.Err(), sha256.Sum256(got) == sha256.Sum256(msg))
	}

	_, n, err = p.eng[0].StartSend(1, [][]byte{msg}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(p.region[0][0:], 24<<10+1) // the reused slot's header, at the region's start
	r, err = p.eng[1].StartRecv(0, rts[:n], [][]byte{got})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.eng[1].Progress(); err != nil {
		t.Fatal(err)
	}
	var ce *lmt.CorruptError
	if !errors.As(r.Err(), &ce) || !strings.Contains(r.Err().Error(), "arena-copy slot header: 24577 bytes in the slot, the message has 24576") {
		t.Fatalf("receive under a header past the message: %v, want a CorruptError naming the arena-copy slot header", r.Err())
	}
}

// TestArenaCopyReusesSlots: a stream of messages, one at a time, reuses the
// one slot it took, and a message allocates nothing in steady state.
func TestArenaCopyReusesSlots(t *testing.T) {
	p := newPair(t, 2<<20)
	msg, got := make([]byte, 16<<10), make([]byte, 16<<10)
	fill(msg, 9)
	send, recv := [][]byte{msg}, [][]byte{got}
	rts := make([]byte, 512)
	one := func() {
		s, n, err := p.eng[0].StartSend(1, send, "", rts)
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.eng[1].StartRecv(0, rts[:n], recv)
		if err != nil {
			t.Fatal(err)
		}
		for !r.Done() || p.eng[0].InChannel() > 0 {
			p.deliver(t)
		}
		if s.Err() != nil || r.Err() != nil {
			t.Fatalf("send: %v, receive: %v", s.Err(), r.Err())
		}
		if err := errors.Join(p.eng[0].Release(s), p.eng[1].Release(r)); err != nil {
			t.Fatalf("releasing the transfers: %v", err)
		}
	}
	for range 10 {
		one()
	}
	if a := testing.AllocsPerRun(100, one); a != 0 {
		t.Errorf("%v allocations per message, want 0", a)
	}
	if p.allocs[0] != 1 || sha256.Sum256(got) != sha256.Sum256(msg) {
		t.Errorf("%d slots taken for messages one at a time, want 1; data intact: %v", p.allocs[0], sha256.Sum256(got) == sha256.Sum256(msg))
	}
}

// TestArenaCopyLimits: a message larger than a slot, one in an arena whose
// quarter holds no slot, and one that finds every slot in flight, are
// refused at StartSend with an *lmt.Unavailable saying which; a dead receiver gives the slots of its sends back, and the
// next sends reuse them without taking more from the arena.
func TestArenaCopyLimits(t *testing.T) {
	p := newPair(t, 4*65*arena.SlotSize) // 64 slots and their headers in a quarter
	rts := make([]byte, 512)
	var u *lmt.Unavailable
	_, _, err := p.eng[0].StartSend(1, [][]byte{make([]byte, arena.SlotSize+1)}, "", rts)
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "exceeds its 262144-byte slots") {
		t.Errorf("send of a slot plus one byte: %v, want an *lmt.Unavailable saying it exceeds the slots", err)
	}
	small := newPair(t, 1<<20)
	_, _, err = small.eng[0].StartSend(1, [][]byte{make([]byte, 4<<10)}, "", rts)
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "a quarter of this rank's 1048576-byte arena holds no 262208-byte slot") {
		t.Errorf("send in a 1 MiB arena: %v, want an *lmt.Unavailable saying a quarter of it holds no slot", err)
	}
	msg := make([]byte, 4<<10)
	var sends []*lmt.Transfer
	for range 64 {
		s, _, err := p.eng[0].StartSend(1, [][]byte{msg}, "", rts)
		if err != nil {
			t.Fatal(err)
		}
		sends = append(sends, s)
	}
	_, _, err = p.eng[0].StartSend(1, [][]byte{msg}, "", rts)
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "all 64 slots are in flight (at most 64, and a quarter of the arena)") {
		t.Errorf("65th send in flight: %v, want an *lmt.Unavailable saying all 64 slots are in flight", err)
	}
	gone := errors.New("rank 1 exited")
	p.eng[0].PeerFailed(1, gone)
	for _, s := range sends {
		if !s.Done() {
			t.Fatal("a send to the dead rank is still pending")
		}
	}
	if n := p.eng[0].InChannel(); n != 0 {
		t.Errorf("%d sends still wait for the dead rank's DONE", n)
	}
	// The slots are free again: as many sends to rank 2 take no more.
	for i := range 64 {
		if _, _, err := p.eng[0].StartSend(2, [][]byte{msg}, "", rts); err != nil {
			t.Fatalf("send %d to rank 2 after rank 1 died: %v", i, err)
		}
	}
	if p.allocs[0] != 64 {
		t.Errorf("%d slots taken from the arena, want the 64 of the sends to the dead rank, reused", p.allocs[0])
	}
}

// TestArenaCopyTruncates: a receive buffer shorter than the message takes
// its length from the copy and reports a *lmt.TruncationError; the send,
// complete at its copy, succeeded.
func TestArenaCopyTruncates(t *testing.T) {
	p := newPair(t, 2<<20)
	msg := make([]byte, 32<<10)
	fill(msg, 5)
	rts := make([]byte, 512)
	s, n, err := p.eng[0].StartSend(1, [][]byte{msg}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 20<<10)
	r, err := p.eng[1].StartRecv(0, rts[:n], [][]byte{got})
	if err != nil {
		t.Fatal(err)
	}
	for !r.Done() || p.eng[0].InChannel() > 0 {
		p.deliver(t)
	}
	var te *lmt.TruncationError
	if !errors.As(r.Err(), &te) || te.Len != 32<<10 || te.Cap != 20<<10 || sha256.Sum256(got) != sha256.Sum256(msg[:20<<10]) {
		t.Errorf("receive: %v, prefix intact %v; want a TruncationError of 32768 into 20480 and the first 20480 bytes", r.Err(), sha256.Sum256(got) == sha256.Sum256(msg[:20<<10]))
	}
	if !s.Done() || s.Err() != nil {
		t.Errorf("send: done %v, err %v; want done, nil", s.Done(), s.Err())
	}
}

// BenchmarkArenaCopy is one 16 KiB message through arena-copy, both sides
// in one process (see TestArenaCopyReusesSlots): the engine's and the
// backend's own cost, the two copies included, without the cross-core
// traffic or waiting of a job.
func BenchmarkArenaCopy(b *testing.B) {
	p := newPair(b, 2<<20)
	msg, got := make([]byte, 16<<10), make([]byte, 16<<10)
	send, recv := [][]byte{msg}, [][]byte{got}
	rts := make([]byte, 512)
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		s, n, err := p.eng[0].StartSend(1, send, "", rts)
		if err != nil {
			b.Fatal(err)
		}
		r, err := p.eng[1].StartRecv(0, rts[:n], recv)
		if err != nil {
			b.Fatal(err)
		}
		for !r.Done() || p.eng[0].InChannel() > 0 {
			p.deliver(b)
		}
		if err := errors.Join(s.Err(), r.Err(), p.eng[0].Release(s), p.eng[1].Release(r)); err != nil {
			b.Fatal(err)
		}
	}
}

// copySizes are the messages TestArenaCopyJob sends, the last as a list of
// three buffers; a 300 KiB one exceeds a slot.
var copySizes = []int{4 << 10, 16 << 10, 64 << 10, 256 << 10}

// TestArenaCopyJob: in a job of two processes, sends from ordinary memory
// forced onto arena-copy (the last one a list of three buffers) each
// complete before rank 1 has posted a receive, and rank 0 overwrites its
// buffers before rank 1 posts them; rank 1 still receives every message as
// it was sent (SHA-256), through arena-copy, with no system call on either
// side. A message larger than a slot, sent with a selector that names
// arena-copy, goes by the preference list instead, intact; forced, it
// fails its send saying why. Close waits for the last DONEs.
func TestArenaCopyJob(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, &nemesis.Options{ArenaSize: arenaSize})
		if err != nil {
			return err
		}
		defer ep.Close()
		l, err := attach.Attach(ep, attach.Options{EagerMax: 1, Prefer: []string{lmt.Shm, lmt.CMA},
			Select: func(int) attach.Selector { return namedSelector(lmt.ArenaCopy) }})
		if err != nil {
			return err
		}
		defer l.Close()
		if p.Rank == 0 {
			return sendCopies(ep, l)
		}
		return recvCopies(ep)
	})
}

// namedSelector always names one backend.
type namedSelector string

func (s namedSelector) Backend(int64) string                 { return string(s) }
func (s namedSelector) Observe(string, int64, time.Duration) {}

func sendCopies(ep *nemesis.Endpoint, l *attach.LMT) error {
	reqs := make([]nemesis.Request, len(copySizes))
	for i, n := range copySizes {
		b := make([]byte, n)
		fill(b, i)
		iov := [][]byte{b}
		if i == len(copySizes)-1 {
			iov = [][]byte{b[:1000], nil, b[1000:]}
		}
		if err := l.Isendv(&reqs[i], 1, i, iov, lmt.ArenaCopy); err != nil {
			return err
		}
		if err := ep.Wait(&reqs[i]); err != nil {
			return fmt.Errorf("%d bytes: %w", n, err)
		}
		if st, ok := attach.Stats(&reqs[i]); !ok || st.Backend != lmt.ArenaCopy || st.Syscalls != 0 {
			return fmt.Errorf("%d bytes: sender stats %+v (recorded: %v), want %s and no system call", n, st, ok, lmt.ArenaCopy)
		}
		fill(b, 100+i) // the buffer is the program's again
	}
	big := make([]byte, 300<<10)
	fill(big, 9)
	var bigReq, r nemesis.Request
	if err := ep.Isend(&bigReq, 1, 9, big); err != nil {
		return err
	}
	err := l.Isend(&r, 1, 10, big, lmt.ArenaCopy)
	if err == nil {
		err = ep.Wait(&r)
	}
	var u *lmt.Unavailable
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "exceeds its 262144-byte slots") {
		return fmt.Errorf("300 KiB forced onto arena-copy: %v, want an *lmt.Unavailable saying it exceeds the slots", err)
	}
	if err := ep.Send(1, 11, nil); err != nil { // now rank 1 may receive
		return err
	}
	return ep.Wait(&bigReq)
}

func recvCopies(ep *nemesis.Endpoint) error {
	if _, err := ep.Probe(0, 11); err != nil {
		return err
	}
	for i, n := range copySizes {
		buf := make([]byte, n)
		var r nemesis.Request
		if err := ep.Irecv(&r, 0, i, buf); err != nil {
			return err
		}
		if err := ep.Wait(&r); err != nil {
			return fmt.Errorf("%d bytes: %w", n, err)
		}
		st, ok := attach.Stats(&r)
		if !ok || sha256.Sum256(buf) != sum(n, i) || st.Backend != lmt.ArenaCopy || st.Syscalls != 0 || st.Bytes != int64(n) {
			return fmt.Errorf("%d bytes: checksum equal %v, stats %+v (recorded: %v); want the message as sent, by %s, no system call", n, sha256.Sum256(buf) == sum(n, i), st, ok, lmt.ArenaCopy)
		}
	}
	buf := make([]byte, 300<<10)
	var r nemesis.Request
	if err := ep.Irecv(&r, 0, 9, buf); err != nil {
		return err
	}
	if err := ep.Wait(&r); err != nil {
		return err
	}
	if st, ok := attach.Stats(&r); !ok || sha256.Sum256(buf) != sum(300<<10, 9) || st.Backend == lmt.ArenaCopy || st.Backend == "" {
		return fmt.Errorf("300 KiB with arena-copy selected: checksum equal %v, backend %q; want it intact by the preference list", sha256.Sum256(buf) == sum(300<<10, 9), st.Backend)
	}
	_, err := ep.Recv(0, 11, nil)
	return err
}

// TestArenaCopyDeadSender: a receiver waiting for pieces its sender will
// never copy (the sender died after the first) ends with the PeerError its
// engine is told of, having copied exactly the first piece, instead of
// waiting on the slot's header for ever.
func TestArenaCopyDeadSender(t *testing.T) {
	p := newPair(t, 2<<20)
	msg := make([]byte, 32<<10)
	rts := make([]byte, 512)
	_, n, err := p.eng[0].StartSend(1, [][]byte{msg}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.eng[1].StartRecv(0, rts[:n], [][]byte{make([]byte, len(msg))})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := p.eng[1].Progress(); err != nil {
			t.Fatal(err)
		}
	}
	if r.Done() || r.Moved() != 8<<10 {
		t.Fatalf("receiver done %v having copied %d bytes, want still waiting after 8192", r.Done(), r.Moved())
	}
	gone := errors.New("rank 0 exited")
	p.eng[1].PeerFailed(0, gone)
	var pe *lmt.PeerError
	if !r.Done() || !errors.As(r.Err(), &pe) || pe.Rank != 0 || !errors.Is(r.Err(), gone) {
		t.Fatalf("receive after the sender died: done %v, %v; want a PeerError for rank 0 wrapping %q", r.Done(), r.Err(), gone)
	}
}
