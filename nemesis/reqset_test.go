package nemesis

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
)

// TestRequestSets: TestSome and WaitAny return each completed receive of
// a set once, in index order, skip the inactive (zero) request and the
// ones already returned, and WaitAny says -1 once none is active; every
// buffer holds its message.
func TestRequestSets(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 8})
	a, b := eps[0], eps[1]
	var rs [5]Request // rs[4] is never started
	bufs := make([][]byte, 4)
	for i := range 4 {
		bufs[i] = make([]byte, 100)
		if err := b.Irecv(&rs[i], 0, i, bufs[i]); err != nil {
			t.Fatal(err)
		}
	}
	send := func(tag int) {
		t.Helper()
		if err := a.Send(1, tag, pattern(10*(tag+1), tag)); err != nil {
			t.Fatal(err)
		}
	}
	send(2)
	send(0)
	var got []int
	for len(got) < 2 {
		var err error
		if got, err = b.TestSome(rs[:], got); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("TestSome returned %v, want 0 and 2 once each", got)
	}
	if again, err := b.TestSome(rs[:], nil); len(again) != 0 || err != nil {
		t.Fatalf("TestSome after both were returned: %v, %v; want nothing", again, err)
	}
	for _, tag := range []int{3, 1} {
		send(tag)
		if i, err := b.WaitAny(rs[:]); i != tag || err != nil {
			t.Fatalf("WaitAny after tag %d was sent: %d, %v", tag, i, err)
		}
	}
	if i, err := b.WaitAny(rs[:]); i != -1 || err != nil {
		t.Fatalf("WaitAny with every request returned: %d, %v; want -1, nil", i, err)
	}
	if err := b.WaitAll(rs[:]); err != nil {
		t.Fatalf("WaitAll of complete requests: %v", err)
	}
	for i := range 4 {
		want := pattern(10*(i+1), i)
		if st := rs[i].Status(); st.Count != len(want) || crc32.ChecksumIEEE(bufs[i][:st.Count]) != crc32.ChecksumIEEE(want) {
			t.Errorf("request %d: %+v, bytes %x", i, st, bufs[i][:st.Count])
		}
	}
}

// TestWaitAllErrors: WaitAll waits for every request, then names each one
// that failed by its index, with its own error; a set holding another
// endpoint's request is refused before anything waits.
func TestWaitAllErrors(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 8})
	a, b := eps[0], eps[1]
	var rs [3]Request
	short, long := make([]byte, 4), make([]byte, 64)
	if err := b.Irecv(&rs[0], 0, 0, long); err != nil {
		t.Fatal(err)
	}
	if err := b.Irecv(&rs[2], 0, 2, short); err != nil {
		t.Fatal(err)
	}
	for tag := range 3 {
		if tag != 1 {
			if err := a.Send(1, tag, pattern(10, tag)); err != nil {
				t.Fatal(err)
			}
		}
	}
	err := b.WaitAll(rs[:])
	const want = "request 2: nemesis: message truncated: message of 10 bytes, receive buffer of 4"
	if !errors.Is(err, ErrTruncated) || err.Error() != want {
		t.Fatalf("WaitAll: %v, want %q", err, want)
	}
	if !bytes.Equal(long[:10], pattern(10, 0)) || !bytes.Equal(short, pattern(10, 2)[:4]) {
		t.Fatalf("buffers: %x, %x", long[:10], short)
	}
	var foreign [2]Request
	if err := a.Isend(&foreign[1], 1, 5, []byte("x")); err != nil {
		t.Fatal(err)
	}
	const wantForeign = "nemesis: invalid argument: request 1 of the set was started on another endpoint"
	for name, err := range map[string]error{
		"WaitAll":  b.WaitAll(foreign[:]),
		"WaitAny":  func() error { _, err := b.WaitAny(foreign[:]); return err }(),
		"TestSome": func() error { _, err := b.TestSome(foreign[:], nil); return err }(),
	} {
		if !errors.Is(err, ErrInvalidArg) || err.Error() != wantForeign {
			t.Errorf("%s of another endpoint's request: %v, want %q", name, err, wantForeign)
		}
	}
}

// TestSendrecv: three ranks shift a message round a ring with Sendrecv,
// each sending right and receiving from the left at once, at a size the
// fastbox takes and one of several cells (each rank in its goroutine, so
// that the cells come back while it waits); bad arguments post nothing.
func TestSendrecv(t *testing.T) {
	eps := joinLocal(t, 3, &Options{CellSize: 1024, Cells: 4})
	for _, n := range []int{8, 5000} {
		errs := make(chan error, 3)
		for r, ep := range eps {
			go func() {
				buf := make([]byte, n)
				st, err := ep.Sendrecv((r+1)%3, 7, pattern(n, r), (r+2)%3, 7, buf)
				want := pattern(n, (r+2)%3)
				switch {
				case err != nil:
					errs <- fmt.Errorf("rank %d: %w", r, err)
				case st != (Status{Source: (r + 2) % 3, Tag: 7, Len: n, Count: n}) || crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(want):
					errs <- fmt.Errorf("rank %d: %+v, crc %08x, want %08x", r, st, crc32.ChecksumIEEE(buf), crc32.ChecksumIEEE(want))
				default:
					errs <- nil
				}
			}()
		}
		for range 3 {
			if err := <-errs; err != nil {
				t.Errorf("%d bytes: %v", n, err)
			}
		}
	}
	ep := eps[0]
	if _, err := ep.Sendrecv(3, 0, nil, 1, 0, nil); !errors.Is(err, ErrInvalidRank) || err.Error() != "nemesis: invalid rank: rank 3 in a job of 3" {
		t.Errorf("Sendrecv to rank 3 of 3: %v", err)
	}
	if _, err := ep.Sendrecv(1, 0, nil, 1, -5, nil); !errors.Is(err, ErrInvalidTag) {
		t.Errorf("Sendrecv with receive tag -5: %v", err)
	}
	if !ep.posted.Empty() {
		t.Error("a refused Sendrecv left a receive posted")
	}
}

// TestRequestSetsNoAllocation: once warm, WaitAny, TestSome, WaitAll and
// Sendrecv (to itself) allocate nothing: their conditions live on the
// stack, and Sendrecv's two requests in the endpoint.
func TestRequestSetsNoAllocation(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 8})
	a, b := eps[0], eps[1]
	msg, buf := pattern(64, 1), make([]byte, 3*64)
	var rs [3]Request
	idx := make([]int, 0, 3)
	allocs := testing.AllocsPerRun(200, func() {
		for i := range rs {
			if err := b.Irecv(&rs[i], 0, i, buf[64*i:64*(i+1)]); err != nil {
				t.Fatal(err)
			}
			if err := a.Send(1, i, msg); err != nil {
				t.Fatal(err)
			}
		}
		if i, err := b.WaitAny(rs[:]); i < 0 || err != nil {
			t.Fatalf("WaitAny: %d, %v", i, err)
		}
		if _, err := b.TestSome(rs[:], idx[:0]); err != nil {
			t.Fatal(err)
		}
		if err := b.WaitAll(rs[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Sendrecv(1, 9, msg, 1, 9, buf[:64]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("request sets and Sendrecv allocate %v times per round, want 0", allocs)
	}
}
