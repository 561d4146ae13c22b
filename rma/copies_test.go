package rma_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
	"github.com/knemesis/knemesis/tools/copyprobe"
)

// TestCopyCounts counts, with the eBPF probes, the copies one 16 MiB put
// and one 16 MiB get make: exactly one user-space copy of each byte on an
// allocated window, exactly one kernel copy through CMA (and knem where
// the module is loaded), and nothing else. Rank 0, the initiator, probes
// itself between two fences, where it does nothing but the operation: no
// Nemesis packet crosses then, so every byte counted is the operation's.
func TestCopyCounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: loading BPF programs takes CAP_BPF and CAP_PERFMON")
	}
	const n = 16 << 20
	for _, k := range kinds(t) {
		if k.mech == rma.AM {
			continue // active messages copy per packet, headers included: not a per-byte count
		}
		t.Run(k.name, func(t *testing.T) {
			run(t, 2, k, n, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				if p.Rank != 0 {
					return w.Fence()
				}
				probe, err := copyprobe.Open(copyprobe.Options{Kernel: copyprobe.KernelTracepoint})
				if err != nil {
					return err
				}
				defer probe.Close()
				if err := probe.Track(os.Getpid()); err != nil {
					return err
				}
				buf := make([]byte, n)
				pattern(buf, 1)
				for _, get := range []bool{false, true} {
					if err := probe.Reset(); err != nil {
						return err
					}
					var op rma.Op
					f := w.Put
					if get {
						f = w.Get
					}
					if err := f(&op, 1, 0, buf); err != nil {
						return err
					}
					if err := w.Wait(&op); err != nil {
						return err
					}
					r, err := probe.Read()
					if err != nil {
						return err
					}
					wantUser, wantKernel := uint64(n), uint64(0)
					if k.mech != rma.Shared {
						wantUser, wantKernel = 0, n
					}
					if r.Bytes.User != wantUser || r.Bytes.Kernel != wantKernel {
						return fmt.Errorf("get %v of %d bytes: user copied %d, kernel %d; want exactly %d and %d\n%v", get, n, r.Bytes.User, r.Bytes.Kernel, wantUser, wantKernel, r)
					}
					fmt.Printf("%s get=%v: user %d, kernel %d bytes\n", k.name, get, r.Bytes.User, r.Bytes.Kernel)
				}
				return w.Fence()
			})
		})
	}
}
