package nemesis

import (
	"bytes"
	"errors"
	"testing"
)

// TestImprobe: the message Improbe takes is out of matching: a wildcard
// receive posted after it gets the next message, Mrecv gets the taken one,
// and neither the Message nor a copy of it can be received twice.
func TestImprobe(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 8})
	a, b := eps[0], eps[1]
	if _, ok, err := b.Improbe(AnySource, AnyTag); ok || err != nil {
		t.Fatalf("Improbe with nothing sent: %v, %v", ok, err)
	}
	for _, m := range []string{"first", "second"} {
		if err := a.Send(1, 4, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	m, ok, err := b.Improbe(0, 4)
	if !ok || err != nil || m.Status() != (Status{Source: 0, Tag: 4, Len: 5}) {
		t.Fatalf("Improbe: %+v, %v, %v", m.Status(), ok, err)
	}
	stale := m
	buf := make([]byte, 16)
	if st, err := b.Recv(AnySource, AnyTag, buf); err != nil || string(buf[:st.Count]) != "second" {
		t.Fatalf("wildcard Recv after Improbe: %q, %v; want the second message", buf[:st.Count], err)
	}
	if st, err := b.Mrecv(&m, buf); err != nil || string(buf[:st.Count]) != "first" || st.Source != 0 || st.Tag != 4 {
		t.Fatalf("Mrecv: %q %+v, %v; want the first message", buf[:st.Count], st, err)
	}
	const again = "nemesis: invalid argument: Imrecv of a message not taken by this endpoint's Improbe, or already received"
	for name, mm := range map[string]*Message{"the Message": &m, "a copy": &stale, "a zero Message": {}} {
		if _, err := b.Mrecv(mm, buf); !errors.Is(err, ErrInvalidArg) || err.Error() != again {
			t.Errorf("Mrecv of %s again: %v, want %q", name, err, again)
		}
	}
	if m.Status().Len != 5 {
		t.Errorf("Status after Mrecv: %+v", m.Status())
	}
}

// TestImprobeArriving: a message still arriving through the cells is not
// taken until it is whole, and no later message is taken in its place;
// Mprobe then gets it, and Mrecv into a short buffer truncates it.
func TestImprobeArriving(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 4})
	a, b := eps[0], eps[1]
	msg := pattern(10*a.CellPayload(), 5)
	var s, s2 Request
	if err := a.Isend(&s, 1, 0, msg); err != nil {
		t.Fatal(err)
	}
	if err := a.Isend(&s2, 1, 0, []byte("after")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Improbe(0, 0); ok || err != nil {
		t.Fatalf("Improbe of a message part-way in: %v, %v; want false", ok, err)
	}
	if b.peers[0].asm.ux == nil {
		t.Fatal("test setup: the message is not part-way in")
	}
	var m Message
	for {
		a.Poll()
		var ok bool
		var err error
		if m, ok, err = b.Improbe(0, 0); err != nil || ok {
			break
		}
	}
	if m.Status().Len != len(msg) {
		t.Fatalf("Improbe took %+v, want the %d-byte message", m.Status(), len(msg))
	}
	for !s2.Done() { // the second goes once the first is all in cells
		a.Poll()
		b.Poll()
	}
	m2, err := b.Mprobe(0, 0)
	if err != nil || m2.Status().Len != 5 {
		t.Fatalf("Mprobe: %+v, %v", m2.Status(), err)
	}
	short := make([]byte, 100)
	st, err := b.Mrecv(&m, short)
	if !errors.Is(err, ErrTruncated) || st.Count != 100 || !bytes.Equal(short, msg[:100]) {
		t.Fatalf("Mrecv into 100 bytes: %+v, %v", st, err)
	}
	if st, err := b.Mrecv(&m2, short); err != nil || string(short[:st.Count]) != "after" {
		t.Fatalf("Mrecv of the second: %q, %v", short[:st.Count], err)
	}
}

// TestImprobeNoAllocation: once warm, taking a message with Improbe and
// receiving it with Imrecv allocates nothing: the record goes back to the
// pool it came from.
func TestImprobeNoAllocation(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 8})
	a, b := eps[0], eps[1]
	msg, buf := pattern(500, 1), make([]byte, 500)
	var r Request
	allocs := testing.AllocsPerRun(200, func() {
		if err := a.Send(1, 3, msg); err != nil {
			t.Fatal(err)
		}
		m, ok, err := b.Improbe(0, 3)
		if !ok || err != nil {
			t.Fatalf("Improbe: %v, %v", ok, err)
		}
		if err := b.Imrecv(&r, &m, buf); err != nil {
			t.Fatal(err)
		}
		if err := b.Wait(&r); err != nil || !bytes.Equal(buf, msg) {
			t.Fatalf("Imrecv: %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("Improbe and Imrecv allocate %v times per message, want 0", allocs)
	}
}
