package coll

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// TestNoRankCanResizeTheSharedFile: every rank of a job of three,
// holding the descriptor of the communicator's shared file it is about to
// map (rank 0 made it, the others received it from rank 0's handover
// directory), tries to shrink it to nothing, to half, and to grow it:
// EPERM each time. The collectives then go through the file with the
// right results, and its handover directory is gone from /dev/shm once
// the setup is over.
func TestNoRankCanResizeTheSharedFile(t *testing.T) {
	launchtest.Run(t, 3, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		var dirs []string
		var bad []error
		testHookMapped = func(path string, fd int) {
			dirs = append(dirs, path)
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				bad = append(bad, err)
				return
			}
			for _, n := range []int64{0, st.Size / 2, st.Size + 4096} {
				if err := unix.Ftruncate(fd, n); err != unix.EPERM {
					bad = append(bad, fmt.Errorf("ftruncate of the shared file from %d to %d bytes: %v, want EPERM", st.Size, n, err))
				}
			}
		}
		defer func() { testHookMapped = nil }()
		world := World(ep)
		if err := Barrier(world); err != nil { // sets the shared file up
			return err
		}
		if len(dirs) != 1 || len(bad) != 0 || world.shm.state != shmOn {
			return fmt.Errorf("rank %d mapped the shared file of %q (want one), state %d (want %d): %v", p.Rank, dirs, world.shm.state, shmOn, bad)
		}
		x := []int64{int64(p.Rank + 1)}
		sum := []int64{0}
		if err := Allreduce(world, x, sum, Sum[int64]()); err != nil {
			return err
		}
		if sum[0] != 6 {
			return fmt.Errorf("Allreduce through the shared file: %d, want 6", sum[0])
		}
		if _, err := os.Lstat(dirs[0]); !os.IsNotExist(err) {
			return fmt.Errorf("%s after the setup: %v, want it gone", dirs[0], err)
		}
		return Barrier(world)
	})
}
