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
	const total = 2000
	fb, cell := a.FastboxPayload(), a.CellPayload()
	randSize := func() int {
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
	var (
		sends    [4]Request
		sendBufs [4][]byte
		unrecv   []sentMsg // sent, not yet received, in send order
		nsent    int
		recv     Request
		rbuf     = make([]byte, 4*cell+8)
		want     sentMsg
		posted   bool
		received int
	)
	for received < total {
		switch rng.IntN(5) {
		case 0: // send the next message, if a request slot is free
			if nsent == total {
				break
			}
			slot := nsent % len(sends)
			if sends[slot].state == statePending {
				break
			}
			m := sentMsg{idx: nsent, tag: rng.IntN(3), size: randSize()}
			sendBufs[slot] = make([]byte, m.size)
			stamp(sendBufs[slot], m.tag, m.idx)
			if err := a.Isend(&sends[slot], 1, m.tag, sendBufs[slot]); err != nil {
				t.Fatal(err)
			}
			unrecv = append(unrecv, m)
			nsent++
		case 1:
			if err := a.Poll(); err != nil {
				t.Fatal(err)
			}
		case 2, 3:
			if err := b.Poll(); err != nil {
				t.Fatal(err)
			}
		case 4:
			if posted || len(unrecv) == 0 {
				break
			}
			// Ask for a tag some unreceived message has, or any tag: the
			// receive then must get the earliest such message.
			tag := AnyTag
			if rng.IntN(3) > 0 {
				tag = unrecv[rng.IntN(len(unrecv))].tag
			}
			for i, m := range unrecv {
				if tag == AnyTag || m.tag == tag {
					want = m
					unrecv = append(unrecv[:i], unrecv[i+1:]...)
					break
				}
			}
			src := 0
			if rng.IntN(2) == 0 {
				src = AnySource
			}
			if err := b.Irecv(&recv, src, tag, rbuf); err != nil {
				t.Fatal(err)
			}
			posted = true
		}
		for i := range sends {
			if sends[i].state == stateDone && sends[i].err != nil {
				t.Fatal(sends[i].err)
			}
		}
		if posted && recv.Done() {
			posted = false
			received++
			st := recv.Status()
			expect := make([]byte, want.size)
			stamp(expect, want.tag, want.idx)
			if recv.err != nil || st.Source != 0 || st.Tag != want.tag || st.Len != want.size || !bytes.Equal(rbuf[:st.Count], expect) {
				got := -1
				if st.Count >= 8 {
					got = int(binary.LittleEndian.Uint32(rbuf[4:]))
				}
				t.Fatalf("receive %d: got tag %d len %d (message %d), err %v; want message %d (tag %d, %d bytes)",
					received, st.Tag, st.Len, got, recv.err, want.idx, want.tag, want.size)
			}
		}
	}
	sa, sb := a.Stats(), b.Stats()
	t.Logf("sender %+v; receiver %+v", sa, sb)
	if sa.FastboxMsgs == 0 || sa.QueueMsgs == 0 || sb.SeqFromFbox == 0 || sb.Unexpected == 0 {
		t.Fatalf("the interleaving did not exercise both paths and their reordering: %+v %+v", sa, sb)
	}
}

// TestCellBehindBothFastboxes: two messages fill both fastboxes to a rank
// that polls neither (no receive names the sender), and a third takes a
// cell. The cell's sequence number is two ahead: the receiver must take
// both boxes first, in order, before the cell.
func TestCellBehindBothFastboxes(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 512, Cells: 4, FastboxSize: 128})
	a, b := eps[0], eps[1]
	msgs := [][]byte{make([]byte, 5), make([]byte, 9), make([]byte, 300)}
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
	if st := b.Stats(); st.SeqFromFbox != fboxSlots || st.Unexpected != 3 {
		t.Fatalf("receiver stats %+v: want the cell to pull %d fastbox messages ahead of it, 3 unexpected", st, fboxSlots)
	}
	for i, m := range msgs {
		buf := make([]byte, len(m))
		st, err := b.Recv(0, AnyTag, buf)
		if err != nil || st.Tag != i || !bytes.Equal(buf, m) {
			t.Fatalf("receive %d: tag %d, %v, intact %v", i, st.Tag, err, bytes.Equal(buf, m))
		}
	}
}
