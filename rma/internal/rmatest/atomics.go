package rmatest

import (
	"encoding/binary"
	"fmt"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
)

// AtomicRounds is how many increments each rank makes per word in the
// contention test.
const AtomicRounds = 200

// AtomicsContention is the contention test of one rank of a job of any
// size, on a window of at least 64+8×ranks bytes per rank: every rank,
// rank 0's included, increments the same two words of rank 0's part, one
// with FetchAdd and one with CompareSwap loops. The counts must be exact,
// and the values FetchAdd returned must be every number from 0 to
// ranks×AtomicRounds−1 once (their sum, gathered with puts, says so
// together with the count).
func AtomicsContention(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
	var op rma.Op
	var sum uint64
	for range AtomicRounds {
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
	total := uint64(p.Size * AtomicRounds)
	if got := binary.LittleEndian.Uint64(mem[0:]); got != total {
		return fmt.Errorf("FetchAdd count %d, want %d", got, total)
	}
	if got := binary.LittleEndian.Uint64(mem[8:]); got != total {
		return fmt.Errorf("CompareSwap count %d, want %d", got, total)
	}
	var all uint64
	for r := range p.Size {
		all += binary.LittleEndian.Uint64(mem[64+8*r:])
	}
	if want := total * (total - 1) / 2; all != want {
		return fmt.Errorf("sum of the values FetchAdd returned %d, want %d", all, want)
	}
	return nil
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
