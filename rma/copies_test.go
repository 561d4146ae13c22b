package rma_test

import (
	"os"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
	"github.com/knemesis/knemesis/rma/internal/rmatest"
)

// TestCopyCounts counts, with the eBPF probes, the copies one 16 MiB put
// and one 16 MiB get make: exactly one user-space copy of each byte on an
// allocated window, exactly one kernel copy through CMA (and knem where
// the module is loaded), and nothing else. Rank 0, the initiator, probes
// itself between two fences, where it does nothing but the operation: no
// Nemesis packet crosses then, so every byte counted is the operation's.
func TestCopyCounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("lacks root: loading BPF programs takes CAP_BPF and CAP_PERFMON")
	}
	for _, k := range kinds(t) {
		if k.Mech == rma.AM {
			continue // active messages copy per packet, headers included: not a per-byte count
		}
		t.Run(k.Name, func(t *testing.T) {
			run(t, 2, k, rmatest.CopySize, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				return rmatest.CopyCounts(p, ep, w, k)
			})
		})
	}
}
