package nemesis

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

type sentMsg struct {
	idx, tag, size int
}

// TestOrderRandomInterleavings drives a sender and a receiver from one
// goroutine in a random order of steps (send next, poll sender, poll
// receiver, post receive) so that each message finds the fastbox full or
// empty, cells available or not, its receive posted or not, at random. The
// receiver posts receives for random tags (or AnyTag) and must get, each
// time, the earliest-sent message that matches: MPI non-overtaking per
// (source, tag), across fastbox, one-cell and multi-cell messages.
func TestOrderRandomInterleavings(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			eps := joinLocal(t, 2, &Options{CellSize: 512, Cells: 3, FastboxSize: 128})
			randomOrder(t, eps[0], eps[1], rand.New(rand.NewPCG(seed, 42)))
		})
	}
}

func randomOrder(t *testing.T, a, b *Endpoint, rng *rand.Rand) {
	f := newFlow(a, b, rng)
	for f.received < f.total {
		switch rng.IntN(5) {
		case 0:
			f.send(t)
		case 1:
			if err := a.Poll(); err != nil {
				t.Fatal(err)
			}
		case 2, 3:
			if err := b.Poll(); err != nil {
				t.Fatal(err)
			}
		case 4:
			f.post(t)
		}
		f.check(t)
	}
	sa, sb := a.Stats(), b.Stats()
	t.Logf("sender %+v; receiver %+v", sa, sb)
	if sa.FastboxMsgs == 0 || sa.QueueMsgs == 0 || sb.SeqFromFbox == 0 || sb.Unexpected == 0 {
		t.Fatalf("the interleaving did not exercise both paths and their reordering: %+v %+v", sa, sb)
	}
}

// flow is a stream of random messages from a to b, sent and received in
// steps a test interleaves at random, each receive checked against the
// earliest-sent message it must match.
type flow struct {
	a, b     *Endpoint
	rng      *rand.Rand
	total    int
	randSize func() int
	sends    [4]Request
	sendBufs [4][]byte
	unrecv   []sentMsg // sent, not yet received, in send order
	nsent    int
	recv     Request
	rbuf     []byte
	want     sentMsg
	posted   bool
	received int
}

func newFlow(a, b *Endpoint, rng *rand.Rand) *flow {
	fb, cell := a.FastboxPayload(), a.CellPayload()
	f := &flow{a: a, b: b, rng: rng, total: 2000, rbuf: make([]byte, 4*cell+8)}
	f.randSize = func() int {
		switch rng.IntN(4) {
		case 0:
			return rng.IntN(fb + 1)
		case 1:
			return fb + 1 + rng.IntN(cell-fb)
		case 2:
			return cell + 1 + rng.IntN(3*cell)
		}
		return rng.IntN(9)
	}
	return f
}

// send sends the next message, if a request slot is free.
func (f *flow) send(t *testing.T) {
	if f.nsent == f.total {
		return
	}
	slot := f.nsent % len(f.sends)
	if f.sends[slot].state == statePending {
		return
	}
	m := sentMsg{idx: f.nsent, tag: f.rng.IntN(3), size: f.randSize()}
	f.sendBufs[slot] = make([]byte, m.size)
	stamp(f.sendBufs[slot], m.tag, m.idx)
	if err := f.a.Isend(&f.sends[slot], f.b.Rank(), m.tag, f.sendBufs[slot]); err != nil {
		t.Fatal(err)
	}
	f.unrecv = append(f.unrecv, m)
	f.nsent++
}

// post posts the next receive, for a tag some unreceived message has or
// any tag: it then must get the earliest such message.
func (f *flow) post(t *testing.T) {
	if f.posted || len(f.unrecv) == 0 {
		return
	}
	tag := AnyTag
	if f.rng.IntN(3) > 0 {
		tag = f.unrecv[f.rng.IntN(len(f.unrecv))].tag
	}
	for i, m := range f.unrecv {
		if tag == AnyTag || m.tag == tag {
			f.want = m
			f.unrecv = append(f.unrecv[:i], f.unrecv[i+1:]...)
			break
		}
	}
	src := f.a.Rank()
	if f.rng.IntN(2) == 0 {
		src = AnySource
	}
	if err := f.b.Irecv(&f.recv, src, tag, f.rbuf); err != nil {
		t.Fatal(err)
	}
	f.posted = true
}

func (f *flow) check(t *testing.T) {
	for i := range f.sends {
		if f.sends[i].state == stateDone && f.sends[i].err != nil {
			t.Fatal(f.sends[i].err)
		}
	}
	if !f.posted || !f.recv.Done() {
		return
	}
	f.posted = false
	f.received++
	st := f.recv.Status()
	expect := make([]byte, f.want.size)
	stamp(expect, f.want.tag, f.want.idx)
	if f.recv.err != nil || st.Source != f.a.Rank() || st.Tag != f.want.tag || st.Len != f.want.size || !bytes.Equal(f.rbuf[:st.Count], expect) {
		got := -1
		if st.Count >= 8 {
			got = int(binary.LittleEndian.Uint32(f.rbuf[4:]))
		}
		t.Fatalf("rank %d, receive %d: got tag %d len %d (message %d), err %v; want message %d (tag %d, %d bytes)",
			f.b.Rank(), f.received, st.Tag, st.Len, got, f.recv.err, f.want.idx, f.want.tag, f.want.size)
	}
}

// TestOrderBothWays runs a flow each way between two ranks, interleaved at
// random: each rank's messages carry its acknowledgment of the other's, by
// which a sender knows a fastbox empty without reading its flag. A wrong
// acknowledgment would let a sender overwrite a message its receiver has
// not consumed, which the checks of every receive catch.
func TestOrderBothWays(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			eps := joinLocal(t, 2, &Options{CellSize: 512, Cells: 3, FastboxSize: 128})
			a, b := eps[0], eps[1]
			rng := rand.New(rand.NewPCG(seed, 7))
			ab, ba := newFlow(a, b, rng), newFlow(b, a, rng)
			for ab.received < ab.total || ba.received < ba.total {
				switch rng.IntN(6) {
				case 0:
					ab.send(t)
				case 1:
					ba.send(t)
				case 2:
					ab.post(t)
				case 3:
					ba.post(t)
				case 4:
					if err := a.Poll(); err != nil {
						t.Fatal(err)
					}
				case 5:
					if err := b.Poll(); err != nil {
						t.Fatal(err)
					}
				}
				ab.check(t)
				ba.check(t)
			}
			sa, sb := a.Stats(), b.Stats()
			if sa.AckedBoxes == 0 || sb.AckedBoxes == 0 || sa.FastboxMsgs == sa.AckedBoxes || sb.SeqFromFbox == 0 {
				t.Fatalf("acknowledgments untested: a %+v, b %+v", sa, sb)
			}
		})
	}
}

// TestCellBehindAllFastboxes: small messages fill every fastbox to a rank
// that polls none (no receive names the sender), and one more takes a
// cell. The cell's sequence number is fboxSlots ahead: the receiver must
// take every box first, in order, before the cell.
func TestCellBehindAllFastboxes(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 512, Cells: 4, FastboxSize: 128})
	a, b := eps[0], eps[1]
	var msgs [][]byte
	for i := range fboxSlots {
		msgs = append(msgs, make([]byte, 5+4*i))
	}
	msgs = append(msgs, make([]byte, 300)) // too long for a 128-byte box
	for i, m := range msgs {
		stamp(m, 0, i)
		if err := a.Send(1, i, m); err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); st.FastboxMsgs != fboxSlots || st.QueueMsgs != 1 {
		t.Fatalf("sender stats %+v: want %d messages through fastboxes and 1 through the queue", st, fboxSlots)
	}
	// One Poll: the fastboxes of unexpected sources are scanned only every
	// 64, so the cell is what finds them.
	if err := b.Poll(); err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.SeqFromFbox != fboxSlots || st.Unexpected != uint64(len(msgs)) {
		t.Fatalf("receiver stats %+v: want the cell to pull %d fastbox messages ahead of it, %d unexpected", st, fboxSlots, len(msgs))
	}
	for i, m := range msgs {
		buf := make([]byte, len(m))
		st, err := b.Recv(0, AnyTag, buf)
		if err != nil || st.Tag != i || !bytes.Equal(buf, m) {
			t.Fatalf("receive %d: tag %d, %v, intact %v", i, st.Tag, err, bytes.Equal(buf, m))
		}
	}
}

// TestStreamCopiedOnce: a receiver that takes a burst one Recv at a time
// copies each message once. The Poll that matched the posted receive
// leaves the rest of the burst (in the fastboxes, then in cells) where it
// is for the receives to come, instead of copying it into
// unexpected-message buffers first. Messages and order are intact, and a
// Poll with no receive posted still takes what is there (the last one,
// probed first, arrives unexpected).
func TestStreamCopiedOnce(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	const burst = fboxSlots + 4 // through every fastbox, then cells
	for i := range burst + 1 {
		m := make([]byte, 8)
		binary.LittleEndian.PutUint64(m, uint64(i))
		if err := a.Send(1, 5, m); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 8)
	for i := range burst {
		if _, err := b.Recv(0, 5, buf); err != nil || binary.LittleEndian.Uint64(buf) != uint64(i) {
			t.Fatalf("receive %d: %v, got message %d", i, err, binary.LittleEndian.Uint64(buf))
		}
	}
	if st := b.Stats(); st.Unexpected != 0 {
		t.Fatalf("%d of %d messages went through unexpected-message buffers, want none: %+v", st.Unexpected, burst, st)
	}
	if _, err := b.Probe(0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recv(0, 5, buf); err != nil || binary.LittleEndian.Uint64(buf) != burst {
		t.Fatalf("last receive: %v, got message %d", err, binary.LittleEndian.Uint64(buf))
	}
	if st := b.Stats(); st.Unexpected != 1 {
		t.Fatalf("the probed message: stats %+v, want it unexpected", st)
	}
}
