package knemtest

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
	"github.com/knemesis/knemesis/rma/internal/rmatest"
)

// needKnem skips where the module is not loaded, unless in a KCI guest,
// which must have it.
func needKnem(t *testing.T) {
	t.Helper()
	_, err := os.Stat(knem.DevicePath)
	switch {
	case err == nil:
	case os.Getenv("KNEMESIS_KCI") == "1":
		t.Fatalf("%s missing in the KCI guest, which loads the module: %v", knem.DevicePath, err)
	case errors.Is(err, os.ErrNotExist):
		t.Skipf("%s absent: the knem module is not loaded here (ci/test-kernel.sh runs these tests in QEMU guests)", knem.DevicePath)
	default:
		t.Fatal(err)
	}
}

// TestKnemPutGet: every size, aligned and not, one buffer and a list, put
// and get through a persistent knem region, checked by checksum with
// guard bytes around the target range.
func TestKnemPutGet(t *testing.T) {
	needKnem(t)
	size := rmatest.Sizes[len(rmatest.Sizes)-1] + 2*rmatest.Guard
	rmatest.Run(t, 2, rmatest.Knem, size, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
		return rmatest.PutGet(p, w)
	})
}

// TestKnemNotifyOrder: a notification never comes before its data.
func TestKnemNotifyOrder(t *testing.T) {
	needKnem(t)
	offs := rmatest.NotifyOffsets()
	rmatest.Run(t, 2, rmatest.Knem, offs[len(offs)-1], rmatest.NotifyOrder)
}

// TestKnemDefaultRoute: with the default preference an exposed window
// takes knem where the module is loaded, with nothing refused.
func TestKnemDefaultRoute(t *testing.T) {
	needKnem(t)
	k := rmatest.Kind{Name: "default", Mech: rma.Knem, Make: func(ep *nemesis.Endpoint, size int) (*rma.Window, error) {
		return rma.Expose(ep, make([]byte, size), nil)
	}}
	rmatest.Run(t, 2, k, 4096, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
		if r := w.Route(1 - p.Rank); len(r.Refused) != 0 {
			return fmt.Errorf("route %v refused something", r)
		}
		return w.Fence()
	})
}

// TestKnemCopyCounts: a knem put and get copy each byte once, in the
// kernel (the module's tracepoint counts it), and nowhere else.
func TestKnemCopyCounts(t *testing.T) {
	needKnem(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: loading BPF programs takes CAP_BPF and CAP_PERFMON")
	}
	rmatest.Run(t, 2, rmatest.Knem, rmatest.CopySize, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
		return rmatest.CopyCounts(p, ep, w, rmatest.Knem)
	})
}
