package nemesis

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/datatype"
)

// TestTypedBadInput: a nil description, one reaching past its base
// buffer, and a bad rank are refused at once with errors naming them,
// and the request is left unstarted.
func TestTypedBadInput(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a := eps[0]
	vec, err := datatype.Vector(4, 8, 16) // extent 56
	if err != nil {
		t.Fatal(err)
	}
	var r Request
	err = a.IsendType(&r, 1, 0, make([]byte, 64), nil)
	if !errors.Is(err, ErrInvalidArg) || !strings.Contains(err.Error(), "IsendType: nil datatype") {
		t.Fatalf("nil type: %v, want ErrInvalidArg naming the nil datatype", err)
	}
	err = a.IrecvType(&r, 1, 0, make([]byte, 55), vec)
	var fe *datatype.FieldError
	if !errors.Is(err, ErrInvalidArg) || !errors.Is(err, datatype.ErrShortBuffer) || !errors.As(err, &fe) || fe.Field != "extent" || fe.Value != 56 {
		t.Fatalf("55-byte base for a 56-byte extent: %v, want ErrInvalidArg wrapping the FieldError of the extent", err)
	}
	if err := a.IsendType(&r, 2, 0, make([]byte, 56), vec); !errors.Is(err, ErrInvalidRank) {
		t.Fatalf("rank 2 of 2: %v, want ErrInvalidRank", err)
	}
	if r.state != stateIdle {
		t.Fatalf("a refused request is in state %d, want idle", r.state)
	}
}

// TestTypedNoAllocation: once warm, a typed message of 2,000 blocks of 8
// bytes over several cells, and one through the fastbox, allocate
// nothing, on either side, posted first or late: the cursor walks the
// blocks straight into and out of the cells.
func TestTypedNoAllocation(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 4096, Cells: 16})
	a, b := eps[0], eps[1]
	for _, count := range []int64{2, 2000} {
		typ, err := datatype.Vector(count, 8, 16)
		if err != nil {
			t.Fatal(err)
		}
		src, dst := pattern(int(typ.Extent()), 4), make([]byte, typ.Extent())
		want := make([]byte, len(dst))
		for i := range want {
			if i%16 < 8 {
				want[i] = src[i]
			}
		}
		var s, r Request
		for _, posted := range []bool{true, false} {
			one := func() {
				clear(dst)
				if posted {
					b.IrecvType(&r, 0, 1, dst, typ)
				}
				a.IsendType(&s, 1, 1, src, typ)
				for !s.Done() {
					a.Poll()
					b.Poll()
				}
				if !posted {
					b.Poll()
					b.IrecvType(&r, 0, 1, dst, typ)
				}
				for !r.Done() {
					b.Poll()
				}
			}
			one() // warm the unexpected-message pool
			if allocs := testing.AllocsPerRun(100, one); allocs != 0 {
				t.Errorf("%d blocks, posted first %v: %v allocations per message", count, posted, allocs)
			}
			if !bytes.Equal(dst, want) || r.err != nil || r.Status().Count != int(typ.Size()) {
				t.Fatalf("%d blocks, posted first %v: wrong payload or %v", count, posted, r.err)
			}
		}
	}
	if st := a.Stats(); st.FastboxMsgs == 0 || st.QueueMsgs == 0 {
		t.Fatalf("sender %+v: want messages through the fastbox and the cells", st)
	}
}

// TestTypedAggregated: eight small typed sends in a batch go in one
// aggregate cell, and each is scattered into its receiver's blocks.
func TestTypedAggregated(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	a, b := eps[0], eps[1]
	a.SetStrategy(Aggregate)
	typ, err := datatype.Indexed([]int64{3, 5}, []int64{1, 6}) // 8 bytes over 11
	if err != nil {
		t.Fatal(err)
	}
	var sends, recvs [8]Request
	bases := make([][]byte, 8)
	a.Batch()
	for i := range sends {
		if err := a.IsendType(&sends[i], 1, i, pattern(11, i), typ); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range recvs {
		bases[i] = bytes.Repeat([]byte{0xEE}, 12)
		if err := b.IrecvType(&recvs[i], 0, i, bases[i], typ); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(&recvs[i]); err != nil {
			t.Fatal(err)
		}
		p := pattern(11, i)
		want := append([]byte{0xEE}, p[1:4]...)
		want = append(append(want, 0xEE, 0xEE), p[6:11]...)
		if want = append(want, 0xEE); !bytes.Equal(bases[i], want) {
			t.Fatalf("message %d: % x, want % x", i, bases[i], want)
		}
	}
	if st := a.Stats(); st.Cells != 1 || st.AggregateCells != 1 || st.Aggregated != 8 {
		t.Fatalf("sender %+v: want the 8 messages in one aggregate cell", st)
	}
}

// TestTypedRendezvousNeedsTypedLMT: an LMT that does not take datatypes
// never gets a typed send (it goes through the cells, whatever its
// length), and a typed receive of its rendezvous fails with
// ErrNotSupported, naming the sender, instead of handing it a request
// whose buffers it cannot see.
func TestTypedRendezvousNeedsTypedLMT(t *testing.T) {
	a, b, events := fakePair(t, &Options{CellSize: 1024, Cells: 8})
	typ, err := datatype.Vector(100, 30, 32) // 3000 bytes, over the fake's 100
	if err != nil {
		t.Fatal(err)
	}
	src, dst := pattern(int(typ.Extent()), 5), make([]byte, typ.Extent())
	var sends, recvs [1]Request
	if err := a.IsendType(&sends[0], 1, 1, src, typ); err != nil {
		t.Fatal(err)
	}
	if err := b.IrecvType(&recvs[0], 0, 1, dst, typ); err != nil {
		t.Fatal(err)
	}
	drive(t, a, b, sends[:], recvs[:])
	if len(*events) != 0 || a.Stats().RTS != 0 {
		t.Fatalf("typed send reached the LMT: %v, %+v", *events, a.Stats())
	}
	packed := make([]byte, typ.Size())
	got := make([]byte, typ.Size())
	typ.Pack(packed, src)
	typ.Pack(got, dst)
	if !bytes.Equal(got, packed) {
		t.Fatal("typed message through the cells: wrong payload")
	}

	msg := pattern(3000, 6)
	var s, r Request
	if err := a.Isend(&s, 1, 2, msg); err != nil {
		t.Fatal(err)
	}
	if err := b.IrecvType(&r, 0, 2, dst, typ); err != nil {
		t.Fatal(err)
	}
	for !r.Done() {
		a.Poll()
		b.Poll()
	}
	want := "nemesis: not supported: rank 0 sent a 3000-byte message by rendezvous to a typed receive, and this rank's LMT does not take datatypes"
	if !errors.Is(r.err, ErrNotSupported) || r.err.Error() != want {
		t.Fatalf("typed receive of an RTS: %v, want %q", r.err, want)
	}
}

// refusingLMT takes datatypes but refuses every typed send, as an LMT
// with no backend to the peer that moves descriptions does.
type refusingLMT struct{ *fakeLMT }

func (l refusingLMT) Datatypes() bool { return true }

func (l refusingLMT) StartSend(r *Request, rts []byte) (int, error) {
	if r.Type() != nil {
		return 0, errors.New("no backend moves descriptions to this peer")
	}
	return l.fakeLMT.StartSend(r, rts)
}

// TestTypedRefusedGoesByCells: a typed send the LMT refuses goes through
// the cells, and arrives whole in the receiver's blocks.
func TestTypedRefusedGoesByCells(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 8})
	var table []*Request
	events := new([]string)
	for _, ep := range eps {
		if err := ep.SetLMT(refusingLMT{&fakeLMT{ep: ep, table: &table, events: events}}, 100); err != nil {
			t.Fatal(err)
		}
	}
	a, b := eps[0], eps[1]
	typ, err := datatype.Indexed([]int64{1000, 7, 2000}, []int64{3, 1100, 1200})
	if err != nil {
		t.Fatal(err)
	}
	src, dst := pattern(int(typ.Extent()), 7), bytes.Repeat([]byte{0xEE}, int(typ.Extent())+1)
	var sends, recvs [1]Request
	if err := b.IrecvType(&recvs[0], 0, 1, dst, typ); err != nil {
		t.Fatal(err)
	}
	if err := a.IsendType(&sends[0], 1, 1, src, typ); err != nil {
		t.Fatal(err)
	}
	drive(t, a, b, sends[:], recvs[:])
	want := bytes.Repeat([]byte{0xEE}, len(dst))
	for i := range typ.Blocks() {
		off, n := typ.Block(i)
		copy(want[off:off+n], src[off:off+n])
	}
	if !bytes.Equal(dst, want) || sends[0].ViaLMT() || len(*events) != 0 || a.Stats().RTS != 0 {
		t.Fatalf("refused typed send: payload right %v, via LMT %v, LMT events %v, stats %+v", bytes.Equal(dst, want), sends[0].ViaLMT(), *events, a.Stats())
	}
}
