package rma_test

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/rma"
)

// TestNoRankCanResizeTheWindow: every rank of a job of three, holding
// the descriptor of the allocated window it maps (rank 0 made it, the
// others received it), tries to shrink it to nothing, to half, and to
// grow it: EPERM each time. Rank 0's put into every other rank's part
// then arrives whole (checked byte by byte), and nothing of the window
// is left in /dev/shm.
func TestNoRankCanResizeTheWindow(t *testing.T) {
	const part = 1<<20 + 3
	var job string
	launchtest.Run(t, 3, func(p launch.Proc) error {
		job = p.Job
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		var resized []error
		mapped := 0
		rma.OnMapped(func(fd int) {
			mapped++
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				resized = append(resized, err)
				return
			}
			for _, n := range []int64{0, st.Size / 2, st.Size + 4096} {
				if err := unix.Ftruncate(fd, n); err != unix.EPERM {
					resized = append(resized, fmt.Errorf("ftruncate of the window from %d to %d bytes: %v, want EPERM", st.Size, n, err))
				}
			}
		})
		defer rma.OnMapped(nil)
		w, err := rma.Allocate(ep, part, nil)
		if err != nil {
			return err
		}
		if mapped != 1 || len(resized) != 0 {
			return fmt.Errorf("rank %d mapped %d windows (want 1): %v", p.Rank, mapped, resized)
		}
		msg := lmttest.Message(part, 7)
		if p.Rank == 0 {
			for r := 1; r < 3; r++ {
				var op rma.Op
				if err := w.Put(&op, r, 0, msg); err != nil {
					return err
				}
				if err := w.Wait(&op); err != nil {
					return err
				}
			}
		}
		if err := w.Fence(); err != nil {
			return err
		}
		if p.Rank != 0 && !bytes.Equal(w.Local(), msg) {
			return fmt.Errorf("rank %d: its part differs from what rank 0 put (%s)", p.Rank, lmttest.Check(w.Local(), 7))
		}
		if f := shmFiles(p.Job); len(f) != 0 {
			return fmt.Errorf("left in /dev/shm: %v", f)
		}
		return w.Free()
	})
	if f := shmFiles(job); job != "" && len(f) != 0 {
		t.Errorf("left in /dev/shm after the job: %v", f)
	}
}
