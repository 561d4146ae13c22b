package rma_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
)

// TestAtomicsContention: four ranks, rank 0's included, increment the same
// two words of rank 0's part, one with FetchAdd and one with CompareSwap
// loops. The counts must be exact, and the values FetchAdd returned must
// be every number from 0 to 4×rounds−1 once (their sum, gathered with puts,
// says so together with the count).
func TestAtomicsContention(t *testing.T) {
	const ranks, rounds = 4, 200
	for _, k := range []kind{allocated, viaAM} {
		t.Run(k.Name, func(t *testing.T) {
			run(t, ranks, k, 4096, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				var op rma.Op
				var sum uint64
				for range rounds {
					if err := w.FetchAdd(&op, 0, 0, 1); err != nil {
						return err
					}
					if err := w.Wait(&op); err != nil {
						return err
					}
					sum += op.Value()
					if err := casIncrement(w, 0, 8); err != nil {
						return err
					}
				}
				var b [8]byte
				binary.LittleEndian.PutUint64(b[:], sum)
				if err := w.Put(&op, 0, 64+8*p.Rank, b[:]); err != nil {
					return err
				}
				if err := w.Wait(&op); err != nil {
					return err
				}
				if err := w.Fence(); err != nil {
					return err
				}
				if p.Rank != 0 {
					return nil
				}
				mem := w.Local()
				total := uint64(ranks * rounds)
				if got := binary.LittleEndian.Uint64(mem[0:]); got != total {
					return fmt.Errorf("FetchAdd count %d, want %d", got, total)
				}
				if got := binary.LittleEndian.Uint64(mem[8:]); got != total {
					return fmt.Errorf("CompareSwap count %d, want %d", got, total)
				}
				var all uint64
				for r := range ranks {
					all += binary.LittleEndian.Uint64(mem[64+8*r:])
				}
				if want := total * (total - 1) / 2; all != want {
					return fmt.Errorf("sum of the values FetchAdd returned %d, want %d", all, want)
				}
				return nil
			})
		})
	}
}

// casIncrement adds one to the word with a compare-and-swap loop.
func casIncrement(w *rma.Window, target, off int) error {
	var op rma.Op
	var seen uint64
	for {
		if err := w.CompareSwap(&op, target, off, seen, seen+1); err != nil {
			return err
		}
		if err := w.Wait(&op); err != nil {
			return err
		}
		if op.Value() == seen {
			return nil
		}
		seen = op.Value()
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
