package rma_test

import (
	"fmt"
	"hash/crc32"
	"os"
	"testing"

	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/rma"
)

// kind is one way of making a window, with the mechanism its remote
// operations must then use.
type kind struct {
	name string
	mech rma.Mechanism
	make func(ep *nemesis.Endpoint, size int) (*rma.Window, error)
}

func exposeWith(m rma.Mechanism) func(ep *nemesis.Endpoint, size int) (*rma.Window, error) {
	return func(ep *nemesis.Endpoint, size int) (*rma.Window, error) {
		return rma.Expose(ep, make([]byte, size), &rma.Options{Prefer: []rma.Mechanism{m}})
	}
}

var (
	allocated = kind{"allocated", rma.Shared, func(ep *nemesis.Endpoint, size int) (*rma.Window, error) { return rma.Allocate(ep, size, nil) }}
	viaCMA    = kind{"cma", rma.CMA, exposeWith(rma.CMA)}
	viaAM     = kind{"am", rma.AM, exposeWith(rma.AM)}
	viaKnem   = kind{"knem", rma.Knem, exposeWith(rma.Knem)}
)

// kinds are the window kinds this machine can run: knem only where the
// module is loaded.
func kinds(t *testing.T) []kind {
	ks := []kind{allocated, viaCMA, viaAM}
	if _, err := os.Stat(knem.DevicePath); err == nil {
		ks = append(ks, viaKnem)
	} else if _, child := launch.Self(); !child {
		t.Logf("knem windows not run: %v (they run in the QEMU guests)", err)
	}
	return ks
}

// run runs fn as each rank of a job of n, with an endpoint and a window of
// kind k whose part in every rank is size bytes; it checks that remote
// operations use k's mechanism and frees the window.
func run(t *testing.T, n int, k kind, size int, fn func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error) {
	t.Helper()
	launchtest.Run(t, n, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		w, err := k.make(ep, size)
		if err != nil {
			return err
		}
		for r := range n {
			want := k.mech
			if r == p.Rank {
				want = rma.Self
			}
			if got := w.Route(r); got.Mechanism != want {
				return fmt.Errorf("route to rank %d: %v, want %v", r, got, want)
			}
		}
		if err := fn(p, ep, w); err != nil {
			return err
		}
		return w.Free()
	})
}

// pattern fills b with bytes that depend on seed and position.
func pattern(b []byte, seed int) {
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

func crc(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

// checkRange verifies that b holds pattern(seed) in [off, off+n) (by
// checksum) and guard everywhere else.
func checkRange(b []byte, off, n, seed int, guard byte) error {
	want := make([]byte, n)
	pattern(want, seed)
	if got := crc(b[off : off+n]); got != crc(want) {
		return fmt.Errorf("%d bytes at %d: checksum %08x, want %08x", n, off, got, crc(want))
	}
	for i, c := range b {
		if (i < off || i >= off+n) && c != guard {
			return fmt.Errorf("guard byte %d of %d changed to %#x (range %d+%d)", i, len(b), c, off, n)
		}
	}
	return nil
}

func fill(b []byte, c byte) {
	for i := range b {
		b[i] = c
	}
}
