package nemesis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// batchSends starts one Isend of msgs[i] with tag i per message from a to
// dst inside a batch, then flushes it.
func batchSends(t *testing.T, a *Endpoint, dst int, reqs []Request, msgs [][]byte) {
	t.Helper()
	a.Batch()
	for i := range msgs {
		if err := a.Isend(&reqs[i], dst, i, msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		if ok, err := a.Test(&reqs[i]); !ok || err != nil {
			t.Fatalf("send %d after Flush: done %v, %v", i, ok, err)
		}
	}
}

func smallMsgs(count, size, seed int) [][]byte {
	msgs := make([][]byte, count)
	for i := range msgs {
		msgs[i] = pattern(size, seed+i)
	}
	return msgs
}

// recvInOrder receives len(msgs) messages from src with AnyTag and checks
// each is msgs[i], tag i: separate messages, in the order they were sent.
func recvInOrder(t *testing.T, b *Endpoint, src int, msgs [][]byte) {
	t.Helper()
	for i, m := range msgs {
		buf := make([]byte, len(m)+8)
		st, err := b.Recv(src, AnyTag, buf)
		if err != nil || st.Tag != i || st.Len != len(m) || st.Count != len(m) || !bytes.Equal(buf[:len(m)], m) {
			t.Fatalf("receive %d from %d: %+v, %v; want tag %d, %d bytes intact", i, src, st, err, i, len(m))
		}
	}
}

// TestAggregateBatchOneCell: eight 8-byte sends in a batch leave in one
// cell with the aggregate strategy, and in eight line records without it.
func TestAggregateBatchOneCell(t *testing.T) {
	for _, s := range []Strategy{Aggregate, Straightforward} {
		t.Run(s.String(), func(t *testing.T) {
			eps := joinLocal(t, 2, nil)
			a, b := eps[0], eps[1]
			if err := a.SetStrategy(s); err != nil {
				t.Fatal(err)
			}
			msgs := smallMsgs(8, 8, 1)
			batchSends(t, a, 1, make([]Request, 8), msgs)
			st := a.Stats()
			want := Stats{Cells: 1, AggregateCells: 1, Aggregated: 8}
			if s == Straightforward {
				want = Stats{FastboxMsgs: 8, LineMsgs: 8}
			}
			if st != want {
				t.Fatalf("sender stats %+v, want %+v", st, want)
			}
			recvInOrder(t, b, 0, msgs)
			if err := a.Send(1, 99, []byte("after")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 5)
			if st, err := b.Recv(0, AnyTag, buf); err != nil || st.Tag != 99 || string(buf) != "after" {
				t.Fatalf("message after the batch: %+v %v %q", st, err, buf)
			}
		})
	}
}

// TestAggregateHoldsBehindBusyFastbox: without a batch, Isends to a rank
// that does not poll fill the pair's line ring (messages that fit a
// record) and its three fastboxes; the thirteen after them wait in the window
// (not complete) and leave in one cell at the next Poll, which the
// receiver takes behind the boxes, in order.
func TestAggregateHoldsBehindBusyFastbox(t *testing.T) {
	for _, size := range []int{8, boxMsgLen} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			eps := joinLocal(t, 2, nil)
			a, b := eps[0], eps[1]
			if err := a.SetStrategy(Aggregate); err != nil {
				t.Fatal(err)
			}
			boxes := fboxSlots + lineFit(size)
			msgs := smallMsgs(boxes+13, size, 2)
			reqs := make([]Request, len(msgs))
			for i, m := range msgs {
				if err := a.Isend(&reqs[i], 1, i, m); err != nil {
					t.Fatal(err)
				}
				if want := i < boxes; reqs[i].Done() != want {
					t.Fatalf("send %d done %v after Isend, want %v", i, reqs[i].Done(), want)
				}
			}
			if err := a.Poll(); err != nil {
				t.Fatal(err)
			}
			for i := range reqs {
				if !reqs[i].Done() || reqs[i].err != nil {
					t.Fatalf("send %d not complete after Poll: %v", i, reqs[i].err)
				}
			}
			if st := a.Stats(); st.FastboxMsgs != uint64(boxes) || st.LineMsgs != uint64(boxes-fboxSlots) || st.Cells != 1 || st.Aggregated != 13 {
				t.Fatalf("sender stats %+v: want %d boxes (%d line records) and one cell of 13 messages", st, boxes, boxes-fboxSlots)
			}
			recvInOrder(t, b, 0, msgs)
		})
	}
}

// TestAggregateMatchesEachMessage: messages from two senders, each sender's
// in one aggregate cell, are matched one by one: wildcard receives get each
// source's messages in its order, a receive with a named tag skips the
// others (left for later receives), a short buffer truncates its message
// only, and Probe sees the messages separately.
func TestAggregateMatchesEachMessage(t *testing.T) {
	eps := joinLocal(t, 3, nil)
	c := eps[2]
	msgs := [2][][]byte{smallMsgs(6, 24, 10), smallMsgs(6, 24, 20)}
	for src := range 2 {
		eps[src].SetStrategy(Aggregate)
		batchSends(t, eps[src], 2, make([]Request, 6), msgs[src])
		if st := eps[src].Stats(); st.Cells != 1 || st.Aggregated != 6 {
			t.Fatalf("rank %d stats %+v: want one cell of 6", src, st)
		}
	}
	st, err := c.Probe(1, 4)
	if err != nil || st != (Status{Source: 1, Tag: 4, Len: 24}) {
		t.Fatalf("Probe(1, 4): %+v, %v", st, err)
	}
	if st, err := c.Probe(AnySource, 5); err != nil || st.Tag != 5 || st.Len != 24 {
		t.Fatalf("Probe(any, 5): %+v, %v", st, err)
	}
	buf := make([]byte, 24)
	// Tag 3 from rank 0 first, out of its order by tag: the others stay.
	if st, err := c.Recv(0, 3, buf); err != nil || st.Tag != 3 || !bytes.Equal(buf, msgs[0][3]) {
		t.Fatalf("Recv(0, 3): %+v, %v", st, err)
	}
	// Rank 1, tag 2, into 10 bytes: truncated, nothing past the buffer.
	short := make([]byte, 16)
	st, err = c.Recv(1, 2, short[:10])
	if !errors.Is(err, ErrTruncated) || st.Len != 24 || st.Count != 10 || !bytes.Equal(short[:10], msgs[1][2][:10]) || !bytes.Equal(short[10:], make([]byte, 6)) {
		t.Fatalf("truncated Recv(1, 2): %+v, %v, buf %v", st, err, short)
	}
	next := [2]int{}
	got := 0
	for got < 10 {
		st, err := c.Recv(AnySource, AnyTag, buf)
		if err != nil {
			t.Fatal(err)
		}
		src := st.Source
		for next[src] == 3 && src == 0 || next[src] == 2 && src == 1 {
			next[src]++
		}
		if st.Tag != next[src] || !bytes.Equal(buf, msgs[src][st.Tag]) {
			t.Fatalf("wildcard receive %d: rank %d tag %d, want tag %d intact", got, src, st.Tag, next[src])
		}
		next[src]++
		got++
	}
	if _, ok, err := c.Iprobe(AnySource, AnyTag); ok || err != nil {
		t.Fatalf("a message left after all twelve: %v %v", ok, err)
	}
}

// TestAggregateRandomInterleavings is TestOrderRandomInterleavings with
// the aggregate strategy and batches opened and flushed at random: every
// receive still gets the earliest-sent message that matches.
func TestAggregateRandomInterleavings(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			eps := joinLocal(t, 2, &Options{CellSize: 512, Cells: 3, FastboxSize: 128})
			a, b := eps[0], eps[1]
			a.SetStrategy(Aggregate)
			rng := rand.New(rand.NewPCG(seed, 43))
			f := newFlow(a, b, rng)
			for f.received < f.total {
				var err error
				switch rng.IntN(7) {
				case 0, 1:
					f.send(t)
				case 2:
					err = a.Poll()
				case 3, 4:
					err = b.Poll()
				case 5:
					f.post(t)
				case 6:
					if rng.IntN(2) == 0 {
						a.Batch()
					} else {
						err = a.Flush()
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				f.check(t)
			}
			if st := a.Stats(); st.AggregateCells == 0 || st.Aggregated <= st.AggregateCells || st.FastboxMsgs == 0 {
				t.Fatalf("sender %+v: aggregation untested", st)
			}
		})
	}
}

// TestAggregateCellChecked: an aggregate cell whose headers lie fails the
// receiver with ErrCorrupt, whatever the lie.
func TestAggregateCellChecked(t *testing.T) {
	good := func() []byte {
		b := make([]byte, 2*aggHdrSize+16)
		putAggHdr(b, 0, 1, 8, kindMsg, 8)
		putAggHdr(b[aggHdrSize+8:], 1, 2, 8, kindMsg, 8)
		return b
	}
	cases := map[string]struct {
		count uint64
		edit  func([]byte) []byte
	}{
		"no messages":     {0, func(b []byte) []byte { return b }},
		"count too large": {3, func(b []byte) []byte { return b }},
		"wrong sequence":  {2, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[aggHdrSize+8:], 7); return b }},
		"length past end": {2, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[aggHdrSize+8+8:], 9); return b }},
		"wrong kind":      {2, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], kindCont); return b }},
		"total not len":   {2, func(b []byte) []byte { binary.LittleEndian.PutUint64(b[16:], 9); return b }},
		"RTS too long": {2, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[12:], kindRTS)
			binary.LittleEndian.PutUint64(b[16:], 1<<63)
			return b
		}},
		"negative tag":   {2, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[4:], 1<<31); return b }},
		"trailing bytes": {2, func(b []byte) []byte { return append(b, 0) }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			eps := joinLocal(t, 2, &Options{CellSize: 512, Cells: 4})
			a, b := eps[0], eps[1]
			if ok, err := a.sendCell(1, kindAgg, 0, tc.edit(good()), int(tc.count)); !ok || err != nil {
				t.Fatalf("sendCell: %v %v", ok, err)
			}
			// A well-formed first message is delivered; the entry
			// found wrong fails rank 0, and the next receive with it.
			var err error
			for i := 0; i < 3 && err == nil; i++ {
				_, err = b.Recv(0, AnyTag, make([]byte, 8))
			}
			wantCorrupt(t, err, 0)
		})
	}
	eps := joinLocal(t, 2, &Options{CellSize: 512, Cells: 4})
	if ok, err := eps[0].sendCell(1, kindAgg, 0, good(), 2); !ok || err != nil {
		t.Fatalf("sendCell: %v %v", ok, err)
	}
	for tag := 1; tag <= 2; tag++ {
		if st, err := eps[1].Recv(0, AnyTag, make([]byte, 8)); err != nil || st.Tag != tag {
			t.Fatalf("well-formed cell, message %d: %+v %v", tag, st, err)
		}
	}
}

// TestAggregateNoAllocation: a batch of eight sends, aggregated, and their
// receives allocate nothing, posted first or not.
func TestAggregateNoAllocation(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	a.SetStrategy(Aggregate)
	msgs := smallMsgs(8, 8, 3)
	bufs := smallMsgs(8, 8, 0)
	var sends, recvs [8]Request
	for _, posted := range []bool{true, false} {
		one := func() {
			if posted {
				for i := range recvs {
					b.Irecv(&recvs[i], 0, i, bufs[i])
				}
			}
			a.Batch()
			for i := range sends {
				a.Isend(&sends[i], 1, i, msgs[i])
			}
			a.Flush()
			b.Poll()
			if !posted {
				for i := range recvs {
					b.Irecv(&recvs[i], 0, i, bufs[i])
				}
			}
			for i := range recvs {
				b.Wait(&recvs[i])
			}
		}
		one()
		if allocs := testing.AllocsPerRun(100, one); allocs != 0 {
			t.Errorf("receive posted first %v: %v allocations per batch", posted, allocs)
		}
		for i := range bufs {
			if !bytes.Equal(bufs[i], msgs[i]) || recvs[i].err != nil {
				t.Fatalf("message %d: %v", i, recvs[i].err)
			}
		}
	}
	if st := a.Stats(); st.Cells != st.AggregateCells || st.Aggregated != 8*st.AggregateCells {
		t.Fatalf("sender %+v: every batch should be one cell of 8", st)
	}
}

// TestAggregateCarriesRTS: the RTS of a large message waiting in a window
// between small ones joins them in the one cell (NewMadeleine aggregates
// rendezvous requests with data), and the receiver sees the three in
// order, the large one moved by the LMT.
func TestAggregateCarriesRTS(t *testing.T) {
	a, b, events := fakePair(t, &Options{CellSize: 1024, Cells: 4})
	a.SetStrategy(Aggregate)
	msgs := [][]byte{pattern(8, 1), pattern(5000, 2), pattern(8, 3)}
	var sends [3]Request
	a.Batch()
	for i, m := range msgs {
		if err := a.Isend(&sends[i], 1, i, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Cells != 1 || st.Aggregated != 3 || st.RTS != 1 || st.FastboxMsgs != 0 {
		t.Fatalf("sender stats %+v: want one cell carrying two messages and an RTS", st)
	}
	if !sends[0].Done() || sends[1].Done() || !sends[2].Done() {
		t.Fatalf("after Flush: done %v %v %v, want the eager ones only", sends[0].Done(), sends[1].Done(), sends[2].Done())
	}
	for i, m := range msgs {
		buf := make([]byte, 6000)
		st, err := b.Recv(0, AnyTag, buf)
		if err != nil || st.Tag != i || st.Count != len(m) || !bytes.Equal(buf[:len(m)], m) {
			t.Fatalf("receive %d: %+v, %v (events %q)", i, st, err, *events)
		}
	}
	if err := a.Wait(&sends[1]); err != nil {
		t.Fatalf("the LMT send: %v", err)
	}
}

// TestAggregateCarriesControl: an LMT packet (the DONE of a receive) sent
// while the window to its destination holds small messages leaves with
// them, behind them, in their cell; with the straightforward strategy it
// waits for them and takes a packet of its own.
func TestAggregateCarriesControl(t *testing.T) {
	for _, s := range []Strategy{Aggregate, Straightforward} {
		t.Run(s.String(), func(t *testing.T) {
			a, b, events := fakePair(t, &Options{CellSize: 1024, Cells: 4})
			a.SetStrategy(s)
			large := pattern(5000, 9)
			var big Request
			if err := b.Isend(&big, 0, 50, large); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Probe(1, 50); err != nil { // the RTS arrives, unexpected
				t.Fatal(err)
			}
			msgs := smallMsgs(2, 8, 4)
			var sends [2]Request
			a.Batch()
			for i, m := range msgs {
				if err := a.Isend(&sends[i], 1, i, m); err != nil {
					t.Fatal(err)
				}
			}
			buf := make([]byte, 5000)
			var r Request
			if err := a.Irecv(&r, 1, 50, buf); err != nil { // StartRecv sends the DONE
				t.Fatal(err)
			}
			if err := a.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := a.Wait(&r); err != nil || !bytes.Equal(buf, large) {
				t.Fatalf("large receive: %v, intact %v", err, bytes.Equal(buf, large))
			}
			for i := 0; !big.Done(); i++ { // the straightforward DONE waits in a's LMT
				if err := a.Poll(); err != nil || i > 1000 {
					t.Fatalf("rank 0 Poll: %v, or no DONE after %d polls (events %q)", err, i, *events)
				}
				if err := b.Poll(); err != nil {
					t.Fatal(err)
				}
			}
			if big.err != nil {
				t.Fatalf("large send: %v", big.err)
			}
			st := a.Stats()
			want := Stats{Cells: 1, AggregateCells: 1, Aggregated: 3, PackedCtrl: 1, Unexpected: 1}
			if s == Straightforward {
				want = Stats{FastboxMsgs: 2, LineMsgs: 2, FastboxCtrl: 1, AckedBoxes: 1, Unexpected: 1}
			}
			if st != want {
				t.Fatalf("rank 0 stats %+v, want %+v", st, want)
			}
			recvInOrder(t, b, 0, msgs)
		})
	}
}

// multisegShapes are BenchmarkMultisegSplit's messages: the 16
// segments of 8 bytes, which the pair's line ring (32 one-slot records)
// takes whole, so that no segment waits in the window whatever the
// strategy; 48 of 8 bytes, past the ring and the fastboxes; 16 of 64
// bytes, too long for a line record, past the fastboxes.
var multisegShapes = []struct{ Segs, Size int }{{16, 8}, {48, 8}, {16, 64}}

// TestAggregateOneWayCounts: BenchmarkMultisegSplit's round, exactly:
// rank 1 posts the receives, rank 0 sends every segment and tests each
// until complete, then rank 1 tests each. Per round the sender fills the
// boxes a receiver that has not polled leaves it (the line ring for
// segments of up to linePayload bytes, then fastboxes); the aggregate
// strategy sends the segments after them in one cell, the straightforward
// one a cell each. Every message arrives intact, and a round allocates
// nothing.
func TestAggregateOneWayCounts(t *testing.T) {
	for _, sh := range multisegShapes {
		for _, s := range []Strategy{Aggregate, Straightforward} {
			t.Run(fmt.Sprintf("%dx%dB/%v", sh.Segs, sh.Size, s), func(t *testing.T) {
				oneWayCounts(t, s, sh.Segs, sh.Size)
			})
		}
	}
}

func oneWayCounts(t *testing.T, s Strategy, segs, size int) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	if err := a.SetStrategy(s); err != nil {
		t.Fatal(err)
	}
	msgs, bufs := smallMsgs(segs, size, 4), smallMsgs(segs, size, 0)
	sends, recvs := make([]Request, segs), make([]Request, segs)
	var err error
	testAll := func(ep *Endpoint, rs []Request) {
		for i := range rs {
			for done := false; !done && err == nil; done, err = ep.Test(&rs[i]) {
			}
		}
	}
	round := func() {
		for i := range recvs {
			err = errors.Join(err, b.Irecv(&recvs[i], 0, i, bufs[i]))
		}
		for i := range sends {
			err = errors.Join(err, a.Isend(&sends[i], 1, i, msgs[i]))
		}
		testAll(a, sends)
		testAll(b, recvs)
	}
	// What left, and how: fastbox messages (line records included),
	// line record messages, queue messages, cells, aggregate cells, messages in
	// them.
	sent := func() [6]uint64 {
		st := a.Stats()
		return [6]uint64{st.FastboxMsgs, st.LineMsgs, st.QueueMsgs, st.Cells, st.AggregateCells, st.Aggregated}
	}
	lines := min(segs, lineFit(size))
	boxes := min(segs, lines+fboxSlots)
	rest := uint64(segs - boxes)
	want := [6]uint64{uint64(boxes), uint64(lines), rest, rest, 0, 0}
	if s == Aggregate && rest > 0 {
		want = [6]uint64{uint64(boxes), uint64(lines), 0, 1, 1, rest}
	}
	round()
	if got := sent(); err != nil || got != want {
		t.Fatalf("sender after one round: %v, %v; want %v", got, err, want)
	}
	allocs := testing.AllocsPerRun(50, round)
	for i, n := range sent() {
		if n != 52*want[i] {
			t.Errorf("after 52 rounds the sender counts %v, want 52 × %v", sent(), want)
			break
		}
	}
	if allocs != 0 {
		t.Errorf("%v allocations per round", allocs)
	}
	for i := range bufs {
		if err != nil || !bytes.Equal(bufs[i], msgs[i]) || recvs[i].err != nil || recvs[i].Status().Tag != i {
			t.Fatalf("message %d: %v, %v, status %+v", i, err, recvs[i].err, recvs[i].Status())
		}
	}
}
