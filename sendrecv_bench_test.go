package knemesis_test

import (
	"testing"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/internal/jobtest"
	"github.com/knemesis/knemesis/nemesis"
)

// BenchmarkInProcessSendRecv: one 4 MiB message from rank 0 to rank 1 of
// a job joined with knemesis.Join (the automatic choice), both endpoints
// in this process and driven by one goroutine, from ordinary memory. Its
// CPU profile is the walk of a request through the layers, which
// tools/stackwalk counts:
//
//	go test -run '^$' -bench InProcessSendRecv -cpuprofile cpu.prof .
//	go tool pprof -traces knemesis.test cpu.prof | go run ./tools/stackwalk
func BenchmarkInProcessSendRecv(b *testing.B) {
	eps := jobtest.InProcess(b, 2, func(job string, rank int) (*knemesis.Endpoint, error) {
		return knemesis.Join(job, rank, 2, nil)
	}, func(ep *knemesis.Endpoint) {
		if ep != nil {
			ep.Close()
		}
	})
	msg, got := make([]byte, 4<<20), make([]byte, 4<<20)
	var s, r nemesis.Request
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if err := eps[1].Irecv(&r, 0, 1, got); err != nil {
			b.Fatal(err)
		}
		if err := eps[0].Isend(&s, 1, 1, msg); err != nil {
			b.Fatal(err)
		}
		for !s.Done() || !r.Done() {
			if _, err := eps[1].Test(&r); err != nil {
				b.Fatal(err)
			}
			if _, err := eps[0].Test(&s); err != nil {
				b.Fatal(err)
			}
		}
	}
}
