package attach_test

import (
	"testing"

	_ "github.com/knemesis/knemesis/arena"
	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/internal/jobtest"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
)

// joinInProcess joins a job of two endpoints of this process, each with an
// arena and, when withLMT, an LMT, for benchmarks that drive both from one
// goroutine.
func joinInProcess(b *testing.B, withLMT bool) [2]*nemesis.Endpoint {
	if !withLMT {
		return joinInProcessWith(b, nil)
	}
	return joinInProcessWith(b, &attach.Options{})
}

// joinInProcessWith is joinInProcess with the LMT attached with o (none
// when o is nil).
func joinInProcessWith(b *testing.B, o *attach.Options) [2]*nemesis.Endpoint {
	type rank struct {
		ep *nemesis.Endpoint
		l  *attach.LMT
	}
	rs := jobtest.InProcess(b, 2, func(job string, r int) (rank, error) {
		ep, err := nemesis.Join(job, r, 2, &nemesis.Options{ArenaSize: 1 << 20})
		if err != nil || o == nil {
			return rank{ep: ep}, err
		}
		l, err := attach.Attach(ep, *o)
		return rank{ep, l}, err
	}, func(r rank) {
		if r.l != nil {
			r.l.Close()
		}
		if r.ep != nil {
			r.ep.Close()
		}
	})
	return [2]*nemesis.Endpoint{rs[0].ep, rs[1].ep}
}

// BenchmarkInProcessArena: one message from an arena buffer, sent by rank
// 0 and received by rank 1, both endpoints driven by one goroutine, the
// LMT attached as a program gets it. There is no second core and no
// waiting: what is left is the software of the whole path (Isend, the
// descriptor through the fastbox, matching, the receiver's copy, the
// completion slot), the number a change to any of them moves.
// BenchmarkInProcessArenaLMT runs the same through the LMT's arena
// backend (RTS, the engine on both sides, DONE), as before the endpoint
// had its own single copy: run both for the ratio.
func BenchmarkInProcessArena(b *testing.B) {
	benchArena(b, &attach.Options{})
}

// BenchmarkInProcessArenaLMT: BenchmarkInProcessArena with the preference
// naming the arena backend, which then carries every arena message.
func BenchmarkInProcessArenaLMT(b *testing.B) {
	benchArena(b, &attach.Options{Prefer: []string{lmt.Arena}})
}

func benchArena(b *testing.B, o *attach.Options) {
	for _, size := range []int{4 << 10, 16 << 10, 64 << 10} {
		b.Run(sizeLabel(size), func(b *testing.B) {
			eps := joinInProcessWith(b, o)
			msg, err := eps[0].Alloc(size)
			if err != nil {
				b.Fatal(err)
			}
			jobtest.Exchange(b, eps, msg, make([]byte, size))
		})
	}
}

// BenchmarkPollIdleWithLMT: one Poll of an endpoint with an LMT attached
// and a receive posted that nothing answers, the loop a blocked receive
// spins in: its length is how late the receive sees its message.
func BenchmarkPollIdleWithLMT(b *testing.B) {
	eps := joinInProcess(b, true)
	var r nemesis.Request
	if err := eps[1].Irecv(&r, 0, 1, make([]byte, 8)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := eps[1].Test(&r); err != nil {
			b.Fatal(err)
		}
	}
	if err := eps[0].Send(1, 1, make([]byte, 8)); err != nil {
		b.Fatal(err)
	}
	if err := eps[1].Wait(&r); err != nil {
		b.Fatal(err)
	}
}

func sizeLabel(n int) string {
	if n%1024 == 0 {
		return itoa(n>>10) + "KiB"
	}
	return itoa(n) + "B"
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		if n /= 10; n == 0 {
			return string(b[i:])
		}
	}
}

// BenchmarkInProcessEager: the same through cells, from ordinary memory,
// on endpoints without an LMT: the eager path's software.
func BenchmarkInProcessEager(b *testing.B) {
	for _, size := range []int{4 << 10, 16 << 10} {
		b.Run(sizeLabel(size), func(b *testing.B) {
			jobtest.Exchange(b, joinInProcess(b, false), make([]byte, size), make([]byte, size))
		})
	}
}
