package knemtest

import (
	"fmt"
	"os"
	"testing"

	knemdev "github.com/knemesis/knemesis/internal/knemtest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
	"github.com/knemesis/knemesis/rma/internal/rmatest"
)

// needKnem skips where the module is not loaded, unless in a KCI guest,
// which must have it.
func needKnem(t *testing.T) {
	t.Helper()
	knemdev.Open(t)
}

// kinds: a knem window reached by one INLINE_COPY per operation, and one
// whose regions are attached (mapped) once at creation.
var kinds = []rmatest.Kind{rmatest.Knem, rmatest.KnemAttach}

// TestKnemPutGet: every size, aligned and not, one buffer and a list, put
// and get through a persistent knem region, copied by the kernel or
// through the attached region, checked by checksum with guard bytes around
// the target range.
func TestKnemPutGet(t *testing.T) {
	needKnem(t)
	size := rmatest.Sizes[len(rmatest.Sizes)-1] + 2*rmatest.Guard
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			rmatest.Run(t, 2, k, size, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				return rmatest.PutGet(p, w)
			})
		})
	}
}

// TestKnemNotifyOrder: a notification never comes before its data.
func TestKnemNotifyOrder(t *testing.T) {
	needKnem(t)
	offs := rmatest.NotifyOffsets()
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			rmatest.Run(t, 2, k, offs[len(offs)-1], rmatest.NotifyOrder)
		})
	}
}

// TestKnemAttachAtomics: four ranks increment two words of rank 0's part,
// the others through their attachment of its region with CPU atomics,
// rank 0 on its own memory; the counts are exact.
func TestKnemAttachAtomics(t *testing.T) {
	needKnem(t)
	rmatest.Run(t, 4, rmatest.KnemAttach, 4096, rmatest.AtomicsContention)
}

// TestKnemDefaultRoute: with the default preference an exposed window
// attaches the peer's region where the module can, with nothing refused,
// and its operations then are plain copies.
func TestKnemDefaultRoute(t *testing.T) {
	needKnem(t)
	k := rmatest.Kind{Name: "default", Mech: rma.KnemAttach, Make: func(ep *nemesis.Endpoint, size int) (*rma.Window, error) {
		return rma.Expose(ep, make([]byte, size), nil)
	}}
	rmatest.Run(t, 2, k, 4096, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
		if r := w.Route(1 - p.Rank); len(r.Refused) != 0 {
			return fmt.Errorf("route %v refused something", r)
		}
		return w.Fence()
	})
}

// TestKnemCopyCounts: a knem put and get copy each byte once and nowhere
// else: in the kernel (the module's tracepoint counts it) by INLINE_COPY,
// in user space (the memcopy uprobe) through an attached region, with no
// kernel copy at all.
func TestKnemCopyCounts(t *testing.T) {
	needKnem(t)
	if os.Geteuid() != 0 {
		t.Skip("lacks root: loading BPF programs takes CAP_BPF and CAP_PERFMON")
	}
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			rmatest.Run(t, 2, k, rmatest.CopySize, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				return rmatest.CopyCounts(p, ep, w, k)
			})
		})
	}
}

// TestKnemNoAllocs: put and get through a knem window, copied by the
// kernel or through the attachment, allocate nothing.
func TestKnemNoAllocs(t *testing.T) {
	needKnem(t)
	for _, k := range kinds {
		t.Run(k.Name, func(t *testing.T) {
			rmatest.Run(t, 2, k, 4096, rmatest.NoAllocs)
		})
	}
}
