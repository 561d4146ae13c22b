package rma_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/rma"
)

// TestOutOfRange: puts and gets that stick out of the target's part, by a
// byte or by a negative offset, are refused with a RangeError naming
// offset, length and size, and the target's part keeps every byte.
func TestOutOfRange(t *testing.T) {
	const size = 4096
	for _, k := range kinds(t) {
		t.Run(k.Name, func(t *testing.T) {
			run(t, 2, k, size, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				fill(w.Local(), 0xA5)
				if err := w.Fence(); err != nil {
					return err
				}
				if p.Rank == 0 {
					buf := make([]byte, 2)
					var op rma.Op
					for _, c := range []struct {
						name string
						off  int
						f    func(*rma.Op, int, int, []byte) error
					}{
						{"put", size - 1, w.Put}, {"get", size - 1, w.Get}, {"put", -1, w.Put}, {"get", size + 1, w.Get},
						{"put-notify", size - 1, func(op *rma.Op, t, off int, b []byte) error { return w.PutNotify(op, t, off, 1, b) }},
					} {
						err := c.f(&op, 1, c.off, buf)
						var re *rma.RangeError
						want := rma.RangeError{Target: 1, Offset: c.off, Len: 2, Size: size}
						if !errors.As(err, &re) || *re != want {
							return fmt.Errorf("%s of 2 bytes at %d: %v, want %v", c.name, c.off, err, &want)
						}
						if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("2 bytes at offset %d", c.off)) || !strings.Contains(msg, "4096-byte window of rank 1") {
							return fmt.Errorf("error %q does not name offset, length and size", msg)
						}
					}
				}
				if err := w.Fence(); err != nil {
					return err
				}
				return checkRange(w.Local(), 0, 0, 0, 0xA5)
			})
		})
	}
}

// TestFreeInFlight: a window with operations in flight is not freed: Free
// says how many, changes nothing, and succeeds once they completed. (An
// active-message put of 1 MiB needs the target's acknowledgment, a CMA put
// of 16 MiB moves 4 MiB a poll: both are in flight when Free is called.)
func TestFreeInFlight(t *testing.T) {
	for _, k := range []kind{viaAM, viaCMA} {
		t.Run(k.Name, func(t *testing.T) {
			run(t, 2, k, 16<<20, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				if p.Rank == 0 {
					buf := make([]byte, 16<<20)
					pattern(buf, 5)
					var op rma.Op
					if err := w.Put(&op, 1, 0, buf); err != nil {
						return err
					}
					if err := w.Free(); !errors.Is(err, rma.ErrInFlight) || !strings.Contains(err.Error(), "1 operations") {
						return fmt.Errorf("Free with a put in flight: %v, want ErrInFlight naming 1 operation", err)
					}
					if err := w.Put(&op, 1, 0, buf); !errors.Is(err, rma.ErrOpInUse) {
						return fmt.Errorf("reusing an operation in flight: %v, want ErrOpInUse", err)
					}
					if err := w.Wait(&op); err != nil {
						return err
					}
				}
				if err := w.Fence(); err != nil {
					return err
				}
				if p.Rank == 1 {
					return checkRange(w.Local(), 0, 16<<20, 5, 0)
				}
				return nil
			})
		})
	}
}

// shmFiles lists the window files of job in /dev/shm.
func shmFiles(job string) []string {
	m, _ := filepath.Glob("/dev/shm/knemesis-rma-" + job + "-*")
	return m
}

// TestDeadTarget: rank 1 dies (without closing its endpoint) once the
// window exists. Operations rank 0 aims at it fail with a TargetError
// naming it: at once through CMA (the process is gone), when the
// liveness check finds it for active messages (no acknowledgment will
// come), and at Flush for an allocated window, whose memory outlives the
// target. Nothing of the window stays in /dev/shm.
func TestDeadTarget(t *testing.T) {
	for _, k := range []kind{allocated, viaCMA, viaAM} {
		t.Run(k.Name, func(t *testing.T) {
			var job string
			launchtest.RunOpts(t, 2, launchtest.Options{ExitEarly: []int{1}}, func(p launch.Proc) error {
				job = p.Job
				ep, err := nemesis.JoinProc(p, nil)
				if err != nil {
					return err
				}
				w, err := k.Make(ep, 1<<20)
				if err != nil {
					return err
				}
				if err := w.Fence(); err != nil {
					return err
				}
				if p.Rank == 1 {
					os.Exit(0) // dies with the window, its endpoint open
				}
				pid, _ := ep.PeerPID(1)
				for unix.Kill(pid, 0) == nil {
					time.Sleep(time.Millisecond)
				}
				buf := make([]byte, 1<<20)
				var op rma.Op
				for _, get := range []bool{false, true} {
					f := w.Put
					if get {
						f = w.Get
					}
					if err := f(&op, 1, 0, buf); err != nil {
						return err
					}
					err := w.Wait(&op)
					if k.Mech == rma.Allocated && err == nil {
						err = w.Flush(1)
					}
					var te *rma.TargetError
					if !errors.As(err, &te) || te.Rank != 1 || !strings.Contains(err.Error(), "rank 1") {
						return fmt.Errorf("get %v toward dead rank 1: %v, want a TargetError naming it", get, err)
					}
				}
				if err := w.Free(); !errors.As(err, new(*rma.TargetError)) {
					return fmt.Errorf("Free with rank 1 gone: %v, want a TargetError", err)
				}
				if f := shmFiles(p.Job); len(f) != 0 {
					return fmt.Errorf("window files left: %v", f)
				}
				return ep.Close()
			})
			if f := shmFiles(job); job != "" && len(f) != 0 {
				t.Errorf("window files left after the job: %v", f)
			}
		})
	}
}

// TestKilledDuringCreation: rank 1 dies before it maps the window, while
// rank 0 waits in Allocate. It exits at once, which leaves what a SIGKILL
// leaves (no deferred call, no Close), but with status 0, so that the
// launcher lets rank 0 go on: rank 0's Allocate fails naming rank 1, and
// the window's file is gone.
func TestKilledDuringCreation(t *testing.T) {
	launchtest.RunOpts(t, 2, launchtest.Options{ExitEarly: []int{1}}, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		if p.Rank == 1 {
			os.Exit(0)
		}
		_, err = rma.Allocate(ep, 4096, nil)
		var te *rma.TargetError
		if !errors.As(err, &te) || te.Rank != 1 {
			return fmt.Errorf("Allocate with rank 1 killed: %v, want a TargetError naming rank 1", err)
		}
		if f := shmFiles(p.Job); len(f) != 0 {
			return fmt.Errorf("window files left: %v", f)
		}
		return nil
	})
}
