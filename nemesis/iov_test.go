package nemesis

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// guardByte fills the gaps around the entries of a guardedList.
const guardByte = 0xEE

// guardedList carves entries of the given lengths out of one allocation,
// each one 7 bytes after the end of the previous one (so that most start
// unaligned), the gaps and both ends filled with guardByte.
func guardedList(lens []int) (mem []byte, iov [][]byte) {
	const gap = 7
	total := gap
	for _, l := range lens {
		total += l + gap
	}
	mem = bytes.Repeat([]byte{guardByte}, total)
	pos := gap
	for _, l := range lens {
		iov = append(iov, mem[pos:pos+l])
		pos += l + gap
	}
	return mem, iov
}

// checkList checks that iov's entries hold msg end to end and that every
// byte of mem outside them is still guardByte.
func checkList(mem []byte, iov [][]byte, msg []byte) error {
	if got := bytes.Join(iov, nil); !bytes.Equal(got, msg) {
		return fmt.Errorf("the list holds %d bytes that differ from the %d of the message", len(got), len(msg))
	}
	outside := bytes.Count(mem, []byte{guardByte}) - bytes.Count(msg, []byte{guardByte})
	if want := len(mem) - len(msg); outside != want {
		return fmt.Errorf("%d guard bytes intact, want %d", outside, want)
	}
	return nil
}

// TestIovEmptyLists: a nil list and a list of empty entries send and
// receive zero-length messages, and a zero-length message into a list
// leaves every entry untouched.
func TestIovEmptyLists(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	guard := []byte{0xEE, 0xEE}
	for i, send := range [][][]byte{nil, {}, {nil, {}, guard[:0]}} {
		var s, r Request
		rbuf := []byte{0xEE, 0xEE}
		if err := a.Isendv(&s, 1, i, send); err != nil {
			t.Fatal(err)
		}
		if err := b.Irecvv(&r, 0, i, [][]byte{nil, rbuf}); err != nil {
			t.Fatal(err)
		}
		for !(s.Done() && r.Done()) {
			a.Poll()
			b.Poll()
		}
		if s.err != nil || r.err != nil || r.Status() != (Status{Source: 0, Tag: i, Len: 0, Count: 0}) || rbuf[0] != 0xEE || rbuf[1] != 0xEE {
			t.Fatalf("list %d: send %v, receive %v, %+v, %x", i, s.err, r.err, r.Status(), rbuf)
		}
	}
	// A one-byte message into a nil list is truncated, with nothing written.
	var s, r Request
	a.Isendv(&s, 1, 9, [][]byte{nil, {7}})
	b.Irecvv(&r, 0, 9, nil)
	for !(s.Done() && r.Done()) {
		a.Poll()
		b.Poll()
	}
	if !errors.Is(r.err, ErrTruncated) || r.Status() != (Status{Source: 0, Tag: 9, Len: 1, Count: 0}) {
		t.Fatalf("1 byte into a nil list: %v, %+v", r.err, r.Status())
	}
}

// TestIovLateReceiveOfArrivingMessage: a multi-cell message still arriving
// when its list receive is posted goes on into the list where the bytes
// copied from the unexpected buffer ended.
func TestIovLateReceiveOfArrivingMessage(t *testing.T) {
	for _, short := range []int{0, 2*1000 + 7} {
		eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 4})
		a, b := eps[0], eps[1]
		n := 10 * a.CellPayload()
		msg := pattern(n, 9)
		src := [][]byte{nil, msg[:1], msg[1:1], msg[1:4098], msg[4098:], {}}
		mem, dst := guardedList([]int{0, 5, 0, 1500, n - short - 1505, 0})
		var s, r Request
		if err := a.Isendv(&s, 1, 0, src); err != nil {
			t.Fatal(err)
		}
		b.Poll() // the first 4 cells
		a.Poll() // 4 more
		if as := b.peers[0].asm; as.ux == nil || as.got == 0 || as.got == n {
			t.Fatalf("test setup: message not part-way in (%+v)", as)
		}
		if err := b.Irecvv(&r, 0, 0, dst); err != nil {
			t.Fatal(err)
		}
		for !(s.Done() && r.Done()) {
			a.Poll()
			b.Poll()
		}
		var wantErr error
		if short > 0 {
			wantErr = ErrTruncated
		}
		if !errors.Is(r.err, wantErr) || r.Status().Count != n-short {
			t.Fatalf("%d bytes short: %+v, %v", short, r.Status(), r.err)
		}
		if err := checkList(mem, dst, msg[:n-short]); err != nil {
			t.Fatalf("%d bytes short: %v", short, err)
		}
	}
}
