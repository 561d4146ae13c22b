package rmatest

import (
	"fmt"
	"os"
	"time"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
	"github.com/knemesis/knemesis/tools/copyprobe"
)

// CopySize is what the copy-count test puts and gets.
const CopySize = 16 << 20

// CopyCounts is the copy-count test of one rank of a window of kind k and
// CopySize bytes: rank 0, the initiator, probes itself between two fences,
// where it does nothing but one put and one get, and wants exactly one
// user-space copy of each byte on an allocated window and through an
// attached knem region, one kernel copy otherwise (CMA, knem), and nothing
// else.
func CopyCounts(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window, k Kind) error {
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
	buf := make([]byte, CopySize)
	Pattern(buf, 1)
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
		r, err := settled(probe, CopySize)
		if err != nil {
			return err
		}
		wantUser, wantKernel := uint64(CopySize), uint64(0)
		if k.Mech != rma.Allocated && k.Mech != rma.KnemAttach {
			wantUser, wantKernel = 0, CopySize
		}
		if r.Bytes.User != wantUser || r.Bytes.Kernel != wantKernel {
			return fmt.Errorf("get %v of %d bytes: user copied %d, kernel %d; want exactly %d and %d\n%v", get, CopySize, r.Bytes.User, r.Bytes.Kernel, wantUser, wantKernel, r)
		}
		fmt.Printf("%s get=%v: user %d, kernel %d bytes\n", k.Name, get, r.Bytes.User, r.Bytes.Kernel)
	}
	return w.Fence()
}

// settled reads the probe until it has counted n bytes or a few seconds
// have passed. The knem module marks an asynchronous copy's status slot
// done before it fires its knem:knem_copy tracepoint (knem_xfer_finish),
// so a read right after the operation completed can come before the
// event: the count is then exact once the event has landed, never more.
func settled(probe *copyprobe.Probe, n uint64) (copyprobe.Report, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := probe.Read()
		if err != nil || r.Bytes.User+r.Bytes.Kernel >= n || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(time.Millisecond)
	}
}
