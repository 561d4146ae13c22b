package nemesis

import (
	"errors"
	"testing"

	"github.com/knemesis/knemesis/lmt/lmttest"
)

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
		src := lmttest.NewBuffer(n, 1, true)
		src.FillMessage()
		dst := lmttest.NewSplitBuffer(3, []int{0, 5, 0, 1500, n - short - 1505, 0})
		var s, r Request
		if err := a.Isendv(&s, 1, 0, src.Iov); err != nil {
			t.Fatal(err)
		}
		b.Poll() // the first 4 cells
		a.Poll() // 4 more
		if as := b.peers[0].asm; as.ux == nil || as.got == 0 || as.got == n {
			t.Fatalf("test setup: message not part-way in (%+v)", as)
		}
		if err := b.Irecvv(&r, 0, 0, dst.Iov); err != nil {
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
		if err := dst.Verify(n - short); err != nil {
			t.Fatalf("%d bytes short: %v", short, err)
		}
	}
}
