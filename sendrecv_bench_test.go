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
//	go tool pprof -traces knemesis.test cpu.prof |
//		go run ./tools/stackwalk -through BenchmarkInProcessSendRecv
func BenchmarkInProcessSendRecv(b *testing.B) {
	eps := jobtest.InProcess(b, 2, func(job string, rank int) (*knemesis.Endpoint, error) {
		return knemesis.Join(job, rank, 2, nil)
	}, func(ep *knemesis.Endpoint) {
		if ep != nil {
			ep.Close()
		}
	})
	jobtest.Exchange(b, [2]*nemesis.Endpoint{eps[0].Endpoint, eps[1].Endpoint}, make([]byte, 4<<20), make([]byte, 4<<20))
}
