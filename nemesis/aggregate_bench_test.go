package nemesis_test

import (
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/internal/fastclock"
	"github.com/knemesis/knemesis/internal/jobtest"
	"github.com/knemesis/knemesis/nemesis"
)

// joinPair joins a job of two endpoints of this process, for benchmarks
// that drive both from one goroutine.
func joinPair(b *testing.B) [2]*nemesis.Endpoint {
	eps := jobtest.InProcess(b, 2, func(job string, r int) (*nemesis.Endpoint, error) {
		return nemesis.Join(job, r, 2, nil)
	}, func(ep *nemesis.Endpoint) {
		if ep != nil {
			ep.Close()
		}
	})
	return [2]*nemesis.Endpoint{eps[0], eps[1]}
}

// BenchmarkMultisegSplit: one way of lmtbench multiseg's message, segs
// segments of size bytes each sent with its own Isend and received with
// its own Irecv (Aumage, Brunet, Furmento, Namyst, "NewMadeleine: a Fast
// Communication Scheduling Engine for High Performance Networks", CAC
// 2007, §5.2), with both endpoints driven by one goroutine: no second
// core and no waiting, only each side's software, timed apart, per
// message:
//
//	ns-post/msg  the receiver's Irecvs
//	ns-send/msg  the sender's Isends, then its Tests until every send is
//	             complete: the window, the strategy, the copies into
//	             boxes and cells, the queue operations
//	ns-recv/msg  the receiver's Tests until every receive is complete:
//	             the poll, the dequeue, unpacking, matching, the copy out,
//	             the cell's return, completion
//
// for the straightforward strategy and the aggregate one, with the
// sender's boxes (line records and fastboxes), cells and aggregated
// messages per message. The receiver runs only after the sender is
// done, so the sender finds every box of the pair full once it filled
// them (TestAggregateOneWayCounts has the exact counts): 16 × 8 B fits
// the line ring and neither strategy aggregates; 48 × 8 B and
// 16 × 64 B leave 13 segments past the boxes, which aggregate packs into
// one cell and straightforward sends in a cell each. The two-process run
// (lmtbench multiseg) overlaps the sides, whose receiver empties boxes
// while the sender sends. It prints straightforward/aggregate per shape,
// both sides given:
//
//	go test -run '^$' -bench MultisegSplit -benchtime 200000x ./nemesis/
func BenchmarkMultisegSplit(b *testing.B) {
	shapes := []struct{ Segs, Size int }{{16, 8}, {48, 8}, {16, 64}}
	phases := map[string][3]float64{} // post, send, receive: ns a message
	defer func() {
		total := func(p [3]float64) float64 { return p[0] + p[1] + p[2] }
		for _, sh := range shapes {
			name := fmt.Sprintf("%dx%dB", sh.Segs, sh.Size)
			s, a := phases[name+"/straightforward"], phases[name+"/aggregate"]
			if total(s) == 0 || total(a) == 0 {
				continue // a sub-benchmark failed or was not selected
			}
			fmt.Printf("%s one way, ns a message (post + send + receive): straightforward %.1f (%.1f + %.1f + %.1f), aggregate %.1f (%.1f + %.1f + %.1f), straightforward/aggregate %.2f (send %.2f, receive %.2f)\n",
				name, total(s), s[0], s[1], s[2], total(a), a[0], a[1], a[2], total(s)/total(a), s[1]/a[1], s[2]/a[2])
		}
	}()
	for _, sh := range shapes {
		for _, strat := range []nemesis.Strategy{nemesis.Straightforward, nemesis.Aggregate} {
			name := fmt.Sprintf("%dx%dB/%v", sh.Segs, sh.Size, strat)
			b.Run(name, func(b *testing.B) {
				phases[name] = multisegSplit(b, strat, sh.Segs, sh.Size)
			})
		}
	}
}

// multisegSplit runs BenchmarkMultisegSplit's rounds of segs segments of
// size bytes with strategy strat and returns the ns a message of its
// three phases.
func multisegSplit(b *testing.B, strat nemesis.Strategy, segs, size int) [3]float64 {
	eps := joinPair(b)
	if err := eps[0].SetStrategy(strat); err != nil {
		b.Fatal(err)
	}
	send, recv := make([][]byte, segs), make([][]byte, segs)
	sreq, rreq := make([]nemesis.Request, segs), make([]nemesis.Request, segs)
	for i := range send {
		send[i], recv[i] = make([]byte, size), make([]byte, size)
		for j := range send[i] {
			send[i][j] = byte(i*131 + j)
		}
	}
	before := eps[0].Stats()
	var post, sending, receiving int64
	b.ReportAllocs()
	for b.Loop() {
		t0 := fastclock.Nanotime()
		for i := range recv {
			if err := eps[1].Irecv(&rreq[i], 0, i, recv[i]); err != nil {
				b.Fatal(err)
			}
		}
		t1 := fastclock.Nanotime()
		for i := range send {
			if err := eps[0].Isend(&sreq[i], 1, i, send[i]); err != nil {
				b.Fatal(err)
			}
		}
		testAll(b, eps[0], sreq)
		t2 := fastclock.Nanotime()
		testAll(b, eps[1], rreq)
		t3 := fastclock.Nanotime()
		post, sending, receiving = post+t1-t0, sending+t2-t1, receiving+t3-t2
	}
	for i, seg := range recv {
		for j, c := range seg {
			if c != byte(i*131+j) {
				b.Fatalf("segment %d byte %d is %#x", i, j, c)
			}
		}
	}
	after := eps[0].Stats()
	msgs := float64(b.N * segs)
	p := [3]float64{float64(post) / msgs, float64(sending) / msgs, float64(receiving) / msgs}
	b.ReportMetric(p[0], "ns-post/msg")
	b.ReportMetric(p[1], "ns-send/msg")
	b.ReportMetric(p[2], "ns-recv/msg")
	b.ReportMetric(float64(after.FastboxMsgs-before.FastboxMsgs)/msgs, "boxes/msg")
	b.ReportMetric(float64(after.Cells-before.Cells)/msgs, "cells/msg")
	b.ReportMetric(float64(after.Aggregated-before.Aggregated)/msgs, "aggregated/msg")
	b.ReportMetric(0, "ns/op") // the phases above say it per message
	return p
}

// testAll tests the requests of rs on ep, in order, until every one is
// complete.
func testAll(b *testing.B, ep *nemesis.Endpoint, rs []nemesis.Request) {
	for i := range rs {
		for {
			done, err := ep.Test(&rs[i])
			if err != nil {
				b.Fatal(err)
			}
			if done {
				break
			}
		}
	}
}
