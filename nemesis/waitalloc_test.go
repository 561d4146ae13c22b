package nemesis

import (
	"bytes"
	"testing"
)

// TestWaitAllocatesNothing: the one wait loop costs no allocation per
// call, whether the request is already complete (an 8-byte send through a
// fastbox) or completes inside the loop (a small receive posted before its
// message), so that Wait stays off the per-message allocation budget.
func TestWaitAllocatesNothing(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 8})
	a, b := eps[0], eps[1]
	for _, n := range []int{8, 500} {
		msg, buf := pattern(n, 3), make([]byte, n)
		var s, r Request
		one := func() {
			clear(buf)
			b.Irecv(&r, 0, 1, buf)
			a.Isend(&s, 1, 1, msg)
			if err := a.Wait(&s); err != nil {
				t.Fatal(err)
			}
			if err := b.Wait(&r); err != nil {
				t.Fatal(err)
			}
		}
		one()
		if allocs := testing.AllocsPerRun(200, one); allocs != 0 {
			t.Errorf("%d bytes: %v allocations per Isend+Irecv+Wait+Wait", n, allocs)
		}
		if !bytes.Equal(buf, msg) || r.Status().Count != n {
			t.Fatalf("%d bytes: wrong payload (count %d)", n, r.Status().Count)
		}
		done := func() {
			if err := a.Wait(&s); err != nil {
				t.Fatal(err)
			}
		}
		if allocs := testing.AllocsPerRun(1000, done); allocs != 0 {
			t.Errorf("%d bytes: %v allocations per Wait of a completed request", n, allocs)
		}
	}
}

// BenchmarkWait: the Wait of a completed 8-byte request, and a small
// send/recv with a Wait on each side, with their allocations.
func BenchmarkWait(b *testing.B) {
	eps := joinLocal(b, 2, &Options{CellSize: 1024, Cells: 8})
	x, y := eps[0], eps[1]
	msg, buf := pattern(8, 3), make([]byte, 8)
	var s, r Request
	y.Irecv(&r, 0, 1, buf)
	x.Isend(&s, 1, 1, msg)
	if err := x.Wait(&s); err != nil {
		b.Fatal(err)
	}
	if err := y.Wait(&r); err != nil {
		b.Fatal(err)
	}
	b.Run("completed8B", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := x.Wait(&s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sendrecv8B", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			y.Irecv(&r, 0, 1, buf)
			x.Isend(&s, 1, 1, msg)
			if err := x.Wait(&s); err != nil {
				b.Fatal(err)
			}
			if err := y.Wait(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
