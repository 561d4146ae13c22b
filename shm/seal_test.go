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

// TestNoRankCanResizeTheRing: once a message went each way through a live
// job of two (so that both stream rings exist), each rank receives both
// rings of the pair, the one it sends on from its own handover socket
// and the one it reads from its peer's, and tries to shrink each to nothing,
// to half, and to grow it: EPERM each time. Messages through the rings then
// still arrive whole both ways, checked byte by byte, and nothing of the
// job is left in /dev/shm.
func TestNoRankCanResizeTheRing(t *testing.T) {
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
		exchange := func(seed int) error {
			if p.Rank == 0 {
				tr, err := send(ch, eng, 1, size, seed)
				if err != nil {
					return err
				}
				if err := ch.Wait(tr); err != nil {
					return err
				}
				return recv(ch, eng, 1, size, seed+1)
			}
			if err := recv(ch, eng, 0, size, seed); err != nil {
				return err
			}
			tr, err := send(ch, eng, 0, size, seed+1)
			if err != nil {
				return err
			}
			return ch.Wait(tr)
		}
		if err := exchange(1); err != nil {
			return err
		}
		if err := ch.Barrier(); err != nil {
			return err
		}
		env := &lmt.Env{Job: p.Job, Key: key}
		peer := 1 - p.Rank
		if err := resizeRing(env, streamRing, p.Rank, peer); err != nil {
			return err
		}
		if err := resizeRing(env, streamRing, peer, p.Rank); err != nil {
			return err
		}
		if err := ch.Barrier(); err != nil {
			return err
		}
		return exchange(3)
	})
	if err := leftovers(name); err != nil {
		t.Error(err)
	}
}

// TestNoRankCanResizeTheRailRing: the rail's ring of a pair, made by its
// receiver and received by its sender, cannot be shrunk or grown through
// the receiver's handover either.
func TestNoRankCanResizeTheRailRing(t *testing.T) {
	key, err := jobkey.New()
	if err != nil {
		t.Fatal(err)
	}
	snd, rcv := ringPair(t, key)
	openPair(t, snd, rcv, railRing)
	if err := resizeRing(rcv.env, railRing, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := leftovers(snd.env.Job); err != nil {
		t.Error(err)
	}
}

// resizeRing receives the ring of kind from src to dst from its owner's
// handover socket and tries to resize it.
func resizeRing(env *lmt.Env, kind string, src, dst int) error {
	c := (&lmt.Config{}).WithDefaults()
	want := int64(ringSize(c.ShmSlots, c.ShmSlotSize))
	fd, got, err := fdpass.Fetch(poolDir(env, ringOwner(kind, src, dst)), ringServed(kind, src, dst), ringObject(kind, src, dst), fdpass.Want{Size: want})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for _, n := range []int64{0, got / 2, got + 4096} {
		if err := unix.Ftruncate(fd, n); err != unix.EPERM {
			return fmt.Errorf("ftruncate of the %s ring from rank %d to rank %d from %d to %d bytes: %v, want EPERM", kind, src, dst, got, n, err)
		}
	}
	return nil
}
