package rma_test

import (
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
	"github.com/knemesis/knemesis/rma/internal/rmatest"
)

// TestPutGet: rank 0 puts into and gets from rank 1's part, for every size
// (0 B to 16 MiB + 3), at an aligned and an unaligned offset from an
// aligned and an unaligned buffer, as one buffer and as a list; the target
// range is checked by checksum and every byte around it must keep its
// guard value.
func TestPutGet(t *testing.T) {
	for _, k := range kinds(t) {
		t.Run(k.Name, func(t *testing.T) {
			size := rmatest.Sizes[len(rmatest.Sizes)-1] + 2*rmatest.Guard
			run(t, 2, k, size, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				return rmatest.PutGet(p, w)
			})
		})
	}
}

// TestNoAllocs: put and get with caller-owned Ops allocate nothing, on
// every kind of window.
func TestNoAllocs(t *testing.T) {
	for _, k := range kinds(t) {
		t.Run(k.Name, func(t *testing.T) {
			run(t, 2, k, 4096, rmatest.NoAllocs)
		})
	}
}
