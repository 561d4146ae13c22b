package copyprobe_test

import (
	"errors"
	"testing"

	_ "github.com/knemesis/knemesis/cma" // registers the CMA backends
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	_ "github.com/knemesis/knemesis/pipe"     // registers the pipe backend
	_ "github.com/knemesis/knemesis/shm"      // registers the shm backend
	_ "github.com/knemesis/knemesis/vmsplice" // registers the vmsplice backend
)

// The LMT backends, measured as the toolkit runs them: one 16 MiB message
// from rank 0 to rank 1 through the engine, its rendezvous carried by
// lmttest's socket channel (socket traffic is outside the syscall model:
// it shows as unmodelled bytes, not as copies).
func TestLMTBackendCopies(t *testing.T) {
	for _, c := range []struct {
		backend string
		want    expect
	}{
		{"shm", expect{user: 2}},
		{"pipe", expect{kernel: 2}},
		{"vmsplice", expect{kernel: 1}},
		{"cma", expect{kernel: 1}},
		{"cma-write", expect{kernel: 1}},
		{"cma-split", expect{kernel: 1}},
		{"multirail", expect{kernel: 1}},
	} {
		t.Run(c.backend, func(t *testing.T) {
			ctl := lmttest.NewJob(2)
			m, ok := run(t, job{
				setup: ctl.Setup,
				rank: func(p launch.Proc) error {
					ch, eng, err := lmttest.Open(p, c.backend, nil)
					if err != nil {
						return err
					}
					err = lmttest.Transfer(ch, eng, c.backend, 0, 1, lmttest.Case{Size: transferSize})
					// Close drains: a shm or pipe send completes while
					// its bytes are still in the channel, and a sender
					// gone before its receiver took them fails the receive.
					return errors.Join(err, ch.Close())
				},
			})
			if !ok {
				return
			}
			checkModes(t, m, c.want)
			got := m.Tracepoint.Bytes
			wantUser, wantKernel := uint64(c.want.user)*transferSize, uint64(c.want.kernel)*transferSize
			if got.User != wantUser || got.Kernel != wantKernel {
				t.Errorf("counted user %d, kernel %d bytes; want exactly %d and %d", got.User, got.Kernel, wantUser, wantKernel)
			}
		})
	}
}
