package rma_test

import (
	"testing"

	"github.com/knemesis/knemesis/internal/jobtest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/rma"
)

// joinWindows joins a job of two endpoints of this process and allocates
// a window of size bytes per rank over them.
func joinWindows(b *testing.B, size int) ([2]*nemesis.Endpoint, [2]*rma.Window) {
	type rank struct {
		ep *nemesis.Endpoint
		w  *rma.Window
	}
	rs := jobtest.InProcess(b, 2, func(job string, r int) (rank, error) {
		ep, err := nemesis.Join(job, r, 2, nil)
		if err != nil {
			return rank{}, err
		}
		w, err := rma.Allocate(ep, size, nil)
		return rank{ep, w}, err
	}, func(r rank) {
		if r.w != nil {
			r.w.Free()
		}
		if r.ep != nil {
			r.ep.Close()
		}
	})
	return [2]*nemesis.Endpoint{rs[0].ep, rs[1].ep}, [2]*rma.Window{rs[0].w, rs[1].w}
}

// BenchmarkInProcessNotify8B: the 8-byte put-with-notification round trip
// of BenchmarkNotifyPingPong8B with both ranks driven by one goroutine,
// beside Nemesis's 8-byte send and receive driven the same way: no second
// core, no waiting, only the software of each path, which is what the
// two-process ratio's excess over the hardware's share is made of.
// It prints the ns of a round trip of each and their ratio:
//
//	go test -run '^$' -bench InProcessNotify8B -benchtime 1000000x ./rma
func BenchmarkInProcessNotify8B(b *testing.B) {
	const tag = 3
	got := ratios{}
	defer got.print("8 B round trip in one goroutine", "ns", "allocated", "nemesis")
	perTrip := func(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }
	b.Run("allocated", func(b *testing.B) {
		_, ws := joinWindows(b, 64)
		msg := make([]byte, 8)
		var op rma.Op
		oneWay := func(from, to int) {
			if err := ws[from].PutNotify(&op, to, 0, tag, msg); err != nil {
				b.Fatal(err)
			}
			if err := ws[from].Wait(&op); err != nil {
				b.Fatal(err)
			}
			for {
				_, ok, err := ws[to].Notification(from, tag)
				if err != nil {
					b.Fatal(err)
				}
				if ok {
					return
				}
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			oneWay(0, 1)
			oneWay(1, 0)
		}
		got["allocated"] = perTrip(b)
	})
	b.Run("nemesis", func(b *testing.B) {
		eps, _ := joinWindows(b, 64)
		msg, buf := make([]byte, 8), make([]byte, 8)
		var s, r nemesis.Request
		oneWay := func(from, to int) {
			if err := eps[to].Irecv(&r, from, tag, buf); err != nil {
				b.Fatal(err)
			}
			if err := eps[from].Isend(&s, to, tag, msg); err != nil {
				b.Fatal(err)
			}
			for !s.Done() || !r.Done() {
				if _, err := eps[to].Test(&r); err != nil {
					b.Fatal(err)
				}
				if !s.Done() {
					if _, err := eps[from].Test(&s); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			oneWay(0, 1)
			oneWay(1, 0)
		}
		got["nemesis"] = perTrip(b)
	})
}
