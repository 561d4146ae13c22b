package knemesis_test

import (
	"testing"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/coll"
	"github.com/knemesis/knemesis/internal/jobtest"
	"github.com/knemesis/knemesis/rma"
)

// TestLayersTakeTheEndpoint: coll.World and rma.Allocate take the
// *knemesis.Endpoint an application holds, and mean by it the endpoint it
// embeds: World gives the same communicator for both, and the window is
// the endpoint's.
func TestLayersTakeTheEndpoint(t *testing.T) {
	type joined struct {
		ep *knemesis.Endpoint
		w  *rma.Window
	}
	js := jobtest.InProcess(t, 2, func(job string, rank int) (joined, error) {
		ep, err := knemesis.Join(job, rank, 2, nil)
		if err != nil {
			return joined{}, err
		}
		w, err := rma.Allocate(ep, 64, nil)
		return joined{ep, w}, err
	}, func(j joined) {
		if j.w != nil {
			j.w.Free()
		}
		if j.ep != nil {
			j.ep.Close()
		}
	})
	for rank, j := range js {
		if coll.World(j.ep) != coll.World(j.ep.Endpoint) {
			t.Errorf("rank %d: coll.World of the knemesis.Endpoint is not that of its nemesis.Endpoint", rank)
		}
		if j.w.Endpoint() != j.ep.Endpoint || j.w.Rank() != rank || j.w.Size(1-rank) != 64 {
			t.Errorf("rank %d: window of endpoint %p, rank %d, peer's part %d bytes", rank, j.w.Endpoint(), j.w.Rank(), j.w.Size(1-rank))
		}
	}
}
