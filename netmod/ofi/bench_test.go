//go:build ofi

package ofi

import (
	"fmt"
	"testing"
)

// BenchmarkPingPong bounces a message between two endpoints of this
// process, one goroutine polling both: the module's own cost per message
// over tcp;ofi_rxm on the loopback, header and payload in one
// fi_tsendmsg. Compare with fi_pingpong -p "tcp;ofi_rxm" -e rdm -m tagged
// in the same session (a ratio, never an absolute figure).
func BenchmarkPingPong(b *testing.B) {
	for _, n := range []int{8, 4 << 20} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			x, y := pair(b)
			bx, by := make([]byte, n), make([]byte, n)
			ix, iy := [][]byte{bx}, [][]byte{by}
			h := header(n, 0)
			eps := []*Endpoint{x, y}
			var s, r Request
			hop := func(from, to *Endpoint, src, dst [][]byte) {
				if err := to.Irecv(&r, 0, 1, 0, dst); err != nil {
					b.Fatal(err)
				}
				if err := from.Isend(&s, 0, 1, h, src); err != nil {
					b.Fatal(err)
				}
				for !r.Done() || !s.Done() {
					for _, e := range eps {
						if _, err := e.Poll(); err != nil {
							b.Fatal(err)
						}
					}
				}
				if r.Err() != nil || s.Err() != nil {
					b.Fatal(r.Err(), s.Err())
				}
			}
			hop(x, y, ix, iy)
			b.SetBytes(int64(2 * n))
			b.ResetTimer()
			for range b.N {
				hop(x, y, ix, iy)
				hop(y, x, iy, ix)
			}
		})
	}
}

// BenchmarkPollIdle: one Poll of a connected endpoint with nothing
// arriving, the price a shared-memory message pays each time a rank with
// remote peers looks at the provider.
func BenchmarkPollIdle(b *testing.B) {
	x, y := pair(b)
	var s, r Request
	if err := y.Irecv(&r, 0, 1, 0, [][]byte{make([]byte, 8)}); err != nil {
		b.Fatal(err)
	}
	if err := x.Isend(&s, 0, 1, header(8, 0), [][]byte{make([]byte, 8)}); err != nil {
		b.Fatal(err)
	}
	waitAll(b, []*Endpoint{x, y}, &s, &r)
	for b.Loop() {
		if _, err := x.Poll(); err != nil {
			b.Fatal(err)
		}
	}
}
