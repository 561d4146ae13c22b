package nemesis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"unsafe"
)

// fakeLMT moves payload by direct copy between two endpoints of one
// process: the RTS carries an index into a table of send requests. It
// records the protocol events so the test can check their order.
type fakeLMT struct {
	ep      *Endpoint
	table   *[]*Request // shared by both sides: the "backend"
	events  *[]string
	pending [][]byte // DONE packets waiting for a cell
	iov     [][]byte // the list the last StartSend or StartRecv was handed
}

func (l *fakeLMT) log(format string, args ...any) {
	*l.events = append(*l.events, fmt.Sprintf("%d:", l.ep.Rank())+fmt.Sprintf(format, args...))
}

func (l *fakeLMT) StartSend(r *Request, rts []byte) (int, error) {
	*l.table = append(*l.table, r)
	id := len(*l.table) - 1
	binary.LittleEndian.PutUint64(rts, uint64(id))
	l.log("StartSend %d tag %d len %d", id, r.Tag(), r.Len())
	l.iov = r.Iov()
	return 8, nil
}

func (l *fakeLMT) StartRecv(r *Request, rts []byte) error {
	if len(rts) != 8 {
		return fmt.Errorf("RTS of %d bytes", len(rts))
	}
	id := binary.LittleEndian.Uint64(rts)
	s := (*l.table)[id]
	l.log("StartRecv %d from %d tag %d len %d buf %d", id, r.Peer(), r.Tag(), r.Len(), r.Cap())
	l.iov = r.Iov()
	// The fake's "backend" packs; a real one hands both lists on.
	_, _, n := walkIov(l.iov, 0, 0, bytes.Join(s.Iov(), nil), true)
	done := binary.LittleEndian.AppendUint64(nil, id)
	if ok, err := l.ep.SendControl(r.Peer(), done); err != nil {
		return err
	} else if !ok {
		l.pending = append(l.pending, done)
	}
	l.log("Complete recv %d", id)
	l.ep.Complete(r, n, nil)
	return nil
}

func (l *fakeLMT) HandleControl(src int, pkt []byte) error {
	id := binary.LittleEndian.Uint64(pkt)
	s := (*l.table)[id]
	l.log("DONE %d from %d", id, src)
	l.ep.Complete(s, s.Len(), nil)
	return nil
}

func (l *fakeLMT) Progress() error {
	for len(l.pending) > 0 {
		ok, err := l.ep.SendControl(1-l.ep.Rank(), l.pending[0])
		if err != nil || !ok {
			return err
		}
		l.pending = l.pending[1:]
	}
	return nil
}

func (l *fakeLMT) PeerFailed(rank int, err error) { l.log("PeerFailed %d", rank) }

// fakePair joins two endpoints of this process, each with a fakeLMT for
// messages over 100 bytes, and returns them with the protocol event log.
func fakePair(t *testing.T, o *Options) (a, b *Endpoint, events *[]string) {
	t.Helper()
	eps := joinLocal(t, 2, o)
	var table []*Request
	events = new([]string)
	for _, ep := range eps {
		if err := ep.SetLMT(&fakeLMT{ep: ep, table: &table, events: events}, 100); err != nil {
			t.Fatal(err)
		}
	}
	return eps[0], eps[1], events
}

// TestLMTHook: long messages go RTS → StartRecv → Complete while short ones
// stay eager, and the receiver sees them all in send order, whether the RTS
// meets a posted receive or waits as an unexpected message; a short buffer
// gives ErrTruncated without a write past it, and the sender still finishes.
func TestLMTHook(t *testing.T) {
	for _, early := range []bool{true, false} {
		t.Run(fmt.Sprintf("posted-first=%v", early), func(t *testing.T) {
			a, b, events := fakePair(t, &Options{CellSize: 1024, Cells: 4})
			sizes := []int{5, 5000, 100, 101, 3}
			var sends, recvs [5]Request
			rbufs := make([][]byte, 5)
			post := func() {
				for i := range recvs {
					rbufs[i] = make([]byte, 6000)
					if err := b.Irecv(&recvs[i], AnySource, AnyTag, rbufs[i]); err != nil {
						t.Fatal(err)
					}
				}
			}
			if early {
				post()
			}
			for i, n := range sizes {
				msg := make([]byte, n)
				stamp(msg, 0, i)
				if err := a.Isend(&sends[i], 1, i, msg); err != nil {
					t.Fatal(err)
				}
			}
			if !early {
				for range 10 {
					b.Poll() // everything arrives unexpected
				}
				post()
			}
			drive(t, a, b, sends[:], recvs[:])
			for i, n := range sizes {
				st := recvs[i].Status()
				want := make([]byte, n)
				stamp(want, 0, i)
				if recvs[i].err != nil || st.Tag != i || st.Len != n || !bytes.Equal(rbufs[i][:st.Count], want) {
					t.Fatalf("receive %d: %+v, %v; want message %d of %d bytes", i, st, recvs[i].err, i, n)
				}
			}
			if got := a.Stats().RTS; got != 2 {
				t.Fatalf("%d RTS sent, want 2 (5000 and 101 bytes)", got)
			}
			wantEvents := []string{
				"0:StartSend 0 tag 1 len 5000", "0:StartSend 1 tag 3 len 101",
				"1:StartRecv 0 from 0 tag 1 len 5000 buf 6000", "1:Complete recv 0",
				"1:StartRecv 1 from 0 tag 3 len 101 buf 6000", "1:Complete recv 1",
				"0:DONE 0 from 1", "0:DONE 1 from 1",
			}
			if fmt.Sprint(*events) != fmt.Sprint(wantEvents) {
				t.Fatalf("events\n%q\nwant\n%q", *events, wantEvents)
			}

			// Truncation through the LMT.
			msg := make([]byte, 3000)
			stamp(msg, 0, 9)
			buf := make([]byte, 1000+8)
			if err := a.Isend(&sends[0], 1, 9, msg); err != nil {
				t.Fatal(err)
			}
			if err := b.Irecv(&recvs[0], 0, 9, buf[:1000]); err != nil {
				t.Fatal(err)
			}
			drive(t, a, b, sends[:1], recvs[:1])
			if !errors.Is(recvs[0].err, ErrTruncated) || recvs[0].Status().Count != 1000 ||
				!bytes.Equal(buf[:1000], msg[:1000]) || !bytes.Equal(buf[1000:], make([]byte, 8)) {
				t.Fatalf("truncated LMT receive: %+v, %v", recvs[0].Status(), recvs[0].err)
			}
		})
	}
}

// TestLMTGetsTheList: an LMT is handed the caller's own lists, on both
// sides (Request.Iov: the same slice, zero-length entries included), and
// the receive's capacity, the sum of its entries (Request.Cap); a
// single-buffer request shows as a one-entry list holding Buf.
func TestLMTGetsTheList(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 4})
	var table []*Request
	var events []string
	la, lb := &fakeLMT{ep: eps[0], table: &table, events: &events}, &fakeLMT{ep: eps[1], table: &table, events: &events}
	eps[0].SetLMT(la, 100)
	eps[1].SetLMT(lb, 100)
	a, b := eps[0], eps[1]
	msg := pattern(3000, 4)
	sendv := [][]byte{msg[:1000], nil, msg[1000:]}
	mem := make([]byte, 3000+8)
	recvv := [][]byte{mem[:7], {}, mem[7:2990], mem[2990:3000], nil}
	var sends, recvs [2]Request
	if err := a.Isendv(&sends[0], 1, 0, sendv); err != nil {
		t.Fatal(err)
	}
	if err := b.Irecvv(&recvs[0], 0, 0, recvv); err != nil {
		t.Fatal(err)
	}
	drive(t, a, b, sends[:1], recvs[:1])
	same := func(got, want [][]byte) bool {
		return len(got) == len(want) && unsafe.SliceData(got) == unsafe.SliceData(want)
	}
	if !same(la.iov, sendv) || !same(lb.iov, recvv) || recvs[0].Cap() != 3000 || recvs[0].Buf() != nil {
		t.Fatalf("LMT handed lists %p (%d entries) and %p (%d), capacity %d; want the callers' %p (3) and %p (5), 3000",
			unsafe.SliceData(la.iov), len(la.iov), unsafe.SliceData(lb.iov), len(lb.iov), recvs[0].Cap(), unsafe.SliceData(sendv), unsafe.SliceData(recvv))
	}
	if recvs[0].err != nil || recvs[0].Status().Count != 3000 || !bytes.Equal(mem[:3000], msg) || !bytes.Equal(mem[3000:], make([]byte, 8)) {
		t.Fatalf("list receive through the LMT: %+v, %v", recvs[0].Status(), recvs[0].err)
	}

	buf := make([]byte, 200)
	if err := a.Isend(&sends[1], 1, 1, msg[:150]); err != nil {
		t.Fatal(err)
	}
	if err := b.Irecv(&recvs[1], 0, 1, buf); err != nil {
		t.Fatal(err)
	}
	drive(t, a, b, sends[1:], recvs[1:])
	one := func(iov [][]byte, b []byte) bool {
		return len(iov) == 1 && len(iov[0]) == len(b) && unsafe.SliceData(iov[0]) == unsafe.SliceData(b)
	}
	if !one(la.iov, msg[:150]) || !one(lb.iov, buf) || recvs[1].Cap() != 200 || !bytes.Equal(buf[:150], msg[:150]) {
		t.Fatalf("single buffers: LMT handed %d and %d entries, capacity %d", len(la.iov), len(lb.iov), recvs[1].Cap())
	}
}

// TestRTSWithoutLMT: a receiver that has no LMT fails the receive clearly.
func TestRTSWithoutLMT(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 4})
	var table []*Request
	var events []string
	eps[0].SetLMT(&fakeLMT{ep: eps[0], table: &table, events: &events}, 100)
	var s, r Request
	eps[0].Isend(&s, 1, 0, make([]byte, 200))
	eps[1].Irecv(&r, 0, 0, make([]byte, 200))
	for range 10 {
		eps[0].Poll()
		eps[1].Poll()
	}
	if !r.Done() || !errors.Is(r.err, ErrNoLMT) {
		t.Fatalf("receive: done %v, %v; want ErrNoLMT", r.Done(), r.err)
	}
}

func drive(t *testing.T, a, b *Endpoint, sends, recvs []Request) {
	t.Helper()
	for i := 0; ; i++ {
		done := true
		for j := range sends {
			done = done && sends[j].Done() && recvs[j].Done()
		}
		if done {
			break
		}
		if i > 100000 {
			t.Fatal("transfers did not complete")
		}
		if err := a.Poll(); err != nil {
			t.Fatal(err)
		}
		if err := b.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	for j := range sends {
		if sends[j].err != nil {
			t.Fatalf("send %d: %v", j, sends[j].err)
		}
	}
}

// chunkedLMT holds a send for a fixed number of Progress calls, moving
// 64 KiB in each, as a long transfer does; it completes nothing else.
type chunkedLMT struct {
	ep       *Endpoint
	r        *Request
	calls    int // Progress calls so far
	finishAt int
	moved    uint64
}

func (l *chunkedLMT) StartSend(r *Request, rts []byte) (int, error) { l.r = r; return 0, nil }
func (l *chunkedLMT) StartRecv(r *Request, rts []byte) error        { return nil }
func (l *chunkedLMT) HandleControl(src int, pkt []byte) error       { return nil }
func (l *chunkedLMT) PeerFailed(rank int, err error)                {}
func (l *chunkedLMT) Progress() error {
	l.calls++
	if l.r == nil {
		return nil
	}
	l.moved += 64 << 10
	if l.calls == l.finishAt {
		l.ep.Complete(l.r, l.r.Len(), nil)
		l.r = nil
	}
	return nil
}

// meteredLMT is chunkedLMT telling the endpoint how much it moved.
type meteredLMT struct{ chunkedLMT }

func (l *meteredLMT) BytesMoved() uint64 { return l.moved }

// TestWaitSpinsThroughLMTChunks: Wait yields its CPU only when polls move
// nothing. Through an LMT that reports its bytes (LMTMeter), a transfer of
// many chunks never yields; through one that does not, Wait cannot tell and
// yields at every poll past its spin budget.
func TestWaitSpinsThroughLMTChunks(t *testing.T) {
	const chunks = SpinBeforeYield + 2000
	for _, metered := range []bool{true, false} {
		t.Run(fmt.Sprintf("metered=%v", metered), func(t *testing.T) {
			eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 4})
			a := eps[0]
			var l *chunkedLMT
			var hook LMT
			if metered {
				m := &meteredLMT{chunkedLMT{ep: a}}
				l, hook = &m.chunkedLMT, m
			} else {
				l = &chunkedLMT{ep: a}
				hook = l
			}
			if err := a.SetLMT(hook, 100); err != nil {
				t.Fatal(err)
			}
			var r Request
			if err := a.Isend(&r, 1, 0, make([]byte, 5000)); err != nil {
				t.Fatal(err)
			}
			start := l.calls
			l.finishAt = start + chunks
			if err := a.Wait(&r); err != nil {
				t.Fatal(err)
			}
			want := uint64(0)
			if !metered {
				// Idle after each of the first chunks-1 polls; the
				// spin budget covers SpinBeforeYield-1 of them.
				want = uint64(chunks - 1 - (SpinBeforeYield - 1))
			}
			if got := a.Stats().Yields; got != want {
				t.Fatalf("Wait yielded %d times over %d chunks, want %d", got, chunks, want)
			}
		})
	}
}

// TestLMTDataKept: the endpoint keeps LMTData across reuse of a request, so
// that an LMT can recycle its per-message state, and ViaLMT tells whether the
// current message, not an earlier one, is the LMT's.
func TestLMTDataKept(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 4})
	a := eps[0]
	l := &chunkedLMT{ep: a}
	if err := a.SetLMT(l, 100); err != nil {
		t.Fatal(err)
	}
	var r Request
	if err := a.Isend(&r, 1, 0, make([]byte, 5000)); err != nil {
		t.Fatal(err)
	}
	marker := &struct{ x int }{}
	r.LMTData = marker
	l.finishAt = l.calls + 3
	if err := a.Wait(&r); err != nil {
		t.Fatal(err)
	}
	if !r.ViaLMT() {
		t.Fatal("a 5000-byte message past an eager limit of 100: ViaLMT is false")
	}
	if err := a.Isend(&r, 1, 1, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(&r); err != nil {
		t.Fatal(err)
	}
	if r.ViaLMT() || r.LMTData != marker {
		t.Fatalf("after an eager reuse: ViaLMT %v, LMTData %v; want false and the LMT's value kept", r.ViaLMT(), r.LMTData)
	}
}

// TestLMTPacketsViaFastbox: an RTS and the LMT's control packets take a
// fastbox when the one their sequence number names is free, as eager
// messages do, and a cell otherwise: when that box still holds an earlier
// message, or is too small for an RTS. One eager message in flight leaves
// the other box to the RTS (a DONE followed by the next RTS is the case
// this is for); two fill both. Either way the receiver sees everything in
// send order.
func TestLMTPacketsViaFastbox(t *testing.T) {
	for _, c := range []struct {
		name      string
		fbox      int
		busy      int // eager messages sent first, each taking a fastbox
		fboxRTS   uint64
		cells     uint64 // sender's: RTS cells
		fboxCtrl  uint64 // receiver's DONE
		ctrlCells uint64
	}{
		{name: "free", fbox: DefaultFastboxSize, fboxRTS: 1, fboxCtrl: 1},
		{name: "one-busy", fbox: DefaultFastboxSize, busy: 1, fboxRTS: 1, fboxCtrl: 1},
		{name: "all-busy", fbox: DefaultFastboxSize, busy: fboxSlots, cells: 1, fboxCtrl: 1},
		{name: "small", fbox: 256, cells: 1, fboxCtrl: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b, _ := fakePair(t, &Options{FastboxSize: c.fbox})
			n := c.busy + 1
			sends, recvs := make([]Request, n), make([]Request, n)
			msgs, bufs := make([][]byte, n), make([][]byte, n)
			for i := range n {
				size := boxMsgLen // too long for a line record
				if i == c.busy {
					size = 3000 // above the fake LMT's eager limit
				}
				msgs[i], bufs[i] = make([]byte, size), make([]byte, size)
				stamp(msgs[i], i, i)
				if err := b.Irecv(&recvs[i], 0, AnyTag, bufs[i]); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n {
				if err := a.Isend(&sends[i], 1, i, msgs[i]); err != nil {
					t.Fatal(err)
				}
			}
			drive(t, a, b, sends, recvs)
			for i := range n {
				if st := recvs[i].Status(); st.Tag != i || !bytes.Equal(bufs[i], msgs[i]) {
					t.Errorf("receive %d: tag %d, data intact %v", i, st.Tag, bytes.Equal(bufs[i], msgs[i]))
				}
			}
			as, bs := a.Stats(), b.Stats()
			if as.RTS != 1 || as.FastboxRTS != c.fboxRTS || as.Cells != c.cells {
				t.Errorf("sender: %d RTS, %d through a fastbox, %d cells; want 1, %d, %d", as.RTS, as.FastboxRTS, as.Cells, c.fboxRTS, c.cells)
			}
			if bs.FastboxCtrl != c.fboxCtrl || bs.Cells != c.ctrlCells {
				t.Errorf("receiver: %d control packets through a fastbox, %d cells; want %d, %d", bs.FastboxCtrl, bs.Cells, c.fboxCtrl, c.ctrlCells)
			}
			if as.FastboxMsgs != uint64(c.busy) {
				t.Errorf("%d eager messages went through a fastbox, want %d", as.FastboxMsgs, c.busy)
			}
		})
	}
}
