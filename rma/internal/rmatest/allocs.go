package rmatest

import (
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
)

// NoAllocs is the allocation test of one rank: rank 0 puts and gets 4 KiB
// toward rank 1 and waits, with caller-owned Ops, and must allocate
// nothing per operation; both ranks then fence. The window must hold 4 KiB
// per rank.
func NoAllocs(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
	if p.Rank == 0 {
		buf := make([]byte, 4096)
		var op rma.Op
		var err error
		allocs := testing.AllocsPerRun(100, func() {
			if err == nil {
				err = w.Put(&op, 1, 0, buf)
			}
			if err == nil {
				err = w.Wait(&op)
			}
			if err == nil {
				err = w.Get(&op, 1, 0, buf)
			}
			if err == nil {
				err = w.Wait(&op)
			}
		})
		if err != nil {
			return err
		}
		if allocs != 0 {
			return fmt.Errorf("a put and a get of 4 KiB through %v allocated %v times, want 0", w.Route(1).Mechanism, allocs)
		}
	}
	return w.Fence()
}
