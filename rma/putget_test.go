package rma_test

import (
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
)

var sizes = []int{0, 1, 4095, 4097, 64 << 10, 1 << 20, 16<<20 + 3}

const guard = 256

// TestPutGet: rank 0 puts into and gets from rank 1's part, for every size,
// at an aligned and an unaligned offset from an aligned and an unaligned
// buffer, as one buffer and as a list; the target range is checked by
// checksum and every byte around it must keep its guard value.
func TestPutGet(t *testing.T) {
	for _, k := range kinds(t) {
		t.Run(k.name, func(t *testing.T) {
			maxSize := sizes[len(sizes)-1]
			run(t, 2, k, maxSize+2*guard, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				seed := 0
				for _, n := range sizes {
					for _, shift := range []int{0, 3} {
						for _, vec := range []bool{false, true} {
							seed++
							what := fmt.Sprintf("%d bytes, shift %d, list %v", n, shift, vec)
							if err := putCase(p, w, n, shift, vec, seed); err != nil {
								return fmt.Errorf("put of %s: %w", what, err)
							}
							if err := getCase(p, w, n, shift, vec, seed); err != nil {
								return fmt.Errorf("get of %s: %w", what, err)
							}
						}
					}
				}
				return nil
			})
		})
	}
}

// split cuts b into a list of three unequal entries and an empty one.
func split(b []byte) [][]byte {
	a, c := len(b)/3, len(b)/3+len(b)/5
	return [][]byte{b[:a], nil, b[a:c], b[c:]}
}

func putCase(p launch.Proc, w *rma.Window, n, shift int, vec bool, seed int) error {
	if p.Rank == 1 {
		fill(w.Local(), 0xA5)
	}
	if err := w.Fence(); err != nil {
		return err
	}
	if p.Rank == 0 {
		src := make([]byte, n+shift)[shift:]
		pattern(src, seed)
		var op rma.Op
		var err error
		if vec {
			err = w.PutV(&op, 1, guard+shift, split(src))
		} else {
			err = w.Put(&op, 1, guard+shift, src)
		}
		if err != nil {
			return err
		}
		if err := w.Wait(&op); err != nil {
			return err
		}
	}
	if err := w.Fence(); err != nil {
		return err
	}
	if p.Rank == 1 {
		return checkRange(w.Local(), guard+shift, n, seed, 0xA5)
	}
	return nil
}

func getCase(p launch.Proc, w *rma.Window, n, shift int, vec bool, seed int) error {
	if p.Rank == 1 {
		pattern(w.Local()[guard+shift:guard+shift+n], seed)
	}
	if err := w.Fence(); err != nil {
		return err
	}
	if p.Rank == 0 {
		buf := make([]byte, n+2*guard)
		fill(buf, 0x5A)
		dst := buf[guard+shift : guard+shift+n]
		var op rma.Op
		var err error
		if vec {
			err = w.GetV(&op, 1, guard+shift, split(dst))
		} else {
			err = w.Get(&op, 1, guard+shift, dst)
		}
		if err != nil {
			return err
		}
		if err := w.Wait(&op); err != nil {
			return err
		}
		if err := checkRange(buf, guard+shift, n, seed, 0x5A); err != nil {
			return err
		}
	}
	return w.Fence()
}
