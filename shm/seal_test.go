package shm

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// TestNoRankCanResizeThePool: each rank of a live job of two receives
// the other's pool as a receiver does (over the sender's handover socket)
// and tries to shrink it to nothing, to half, and to grow it: EPERM each
// time. Messages through the pools then still arrive whole both ways,
// checked byte by byte.
func TestNoRankCanResizeThePool(t *testing.T) {
	const size = 1<<20 + 3
	job := lmttest.NewJob(2)
	name := launch.NewJobName()
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Job: name}, func(p launch.Proc) error {
		key, err := jobkey.FromEnv()
		if err != nil {
			return err
		}
		ch, eng, err := lmttest.Open(p, lmt.Shm, func(c *lmt.Config) { c.Key = key })
		if err != nil {
			return err
		}
		defer ch.Close()
		if err := ch.Barrier(); err != nil { // both pools are served
			return err
		}
		if err := resizePeerPool(&lmt.Env{Job: p.Job, Key: key}, 1-p.Rank); err != nil {
			return err
		}
		if err := ch.Barrier(); err != nil {
			return err
		}
		if p.Rank == 0 {
			tr, err := send(ch, eng, 1, size, 1)
			if err != nil {
				return err
			}
			if err := ch.Wait(tr); err != nil {
				return err
			}
			return recv(ch, eng, 1, size, 2)
		}
		if err := recv(ch, eng, 0, size, 1); err != nil {
			return err
		}
		tr, err := send(ch, eng, 0, size, 2)
		if err != nil {
			return err
		}
		return ch.Wait(tr)
	})
	if err := leftovers(name); err != nil {
		t.Error(err)
	}
}

// resizePeerPool receives rank's pool and tries to resize it.
func resizePeerPool(env *lmt.Env, rank int) error {
	c := (&lmt.Config{}).WithDefaults()
	want := int64(poolBytes(c.ShmPoolSlots, c.ShmSlotSize))
	fd, got, err := fdpass.Fetch(poolDir(env, rank), "pool", poolObject(rank), fdpass.Want{Size: want})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for _, n := range []int64{0, got / 2, got + 4096} {
		if err := unix.Ftruncate(fd, n); err != unix.EPERM {
			return fmt.Errorf("ftruncate of rank %d's pool from %d to %d bytes: %v, want EPERM", rank, got, n, err)
		}
	}
	return nil
}
