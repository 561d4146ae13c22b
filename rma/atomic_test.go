package rma_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
	"github.com/knemesis/knemesis/rma/internal/rmatest"
)

// TestAtomicsContention: four ranks, rank 0's included, increment the same
// two words of rank 0's part, with FetchAdd and with CompareSwap loops;
// counts exact (rmatest.AtomicsContention).
func TestAtomicsContention(t *testing.T) {
	for _, k := range []kind{allocated, viaAM} {
		t.Run(k.Name, func(t *testing.T) {
			run(t, 4, k, 4096, rmatest.AtomicsContention)
		})
	}
}

// TestAtomicAlignment: an atomic on a word that is not 8-byte aligned is
// refused at once, as is one past the window.
func TestAtomicAlignment(t *testing.T) {
	for _, k := range []kind{allocated, viaAM} {
		t.Run(k.Name, func(t *testing.T) {
			run(t, 2, k, 64, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				var op rma.Op
				if err := w.FetchAdd(&op, 1-p.Rank, 4, 1); !errors.Is(err, rma.ErrAlignment) {
					return fmt.Errorf("FetchAdd at offset 4: %v, want ErrAlignment", err)
				}
				var re *rma.RangeError
				if err := w.CompareSwap(&op, 1-p.Rank, 64, 0, 1); !errors.As(err, &re) || *re != (rma.RangeError{Target: 1 - p.Rank, Offset: 64, Len: 8, Size: 64}) {
					return fmt.Errorf("CompareSwap at offset 64 of 64: %v, want a RangeError", err)
				}
				return w.Fence()
			})
		})
	}
}
