package shm

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// tinyPool gives every rank a pool of 4 slots behind rings of 16
// entries: one transfer of a few slots empties it.
func tinyPool(c *lmt.Config) { c.ShmPoolSlots = 4 }

// send starts a send of size bytes (pattern seed) to dst and its RTS.
func send(ch *lmttest.Channel, eng *lmt.Engine, dst, size, seed int) (*lmt.Transfer, error) {
	rts := make([]byte, 4096)
	tr, n, err := eng.StartSend(dst, [][]byte{lmttest.Message(size, seed)}, lmt.Shm, rts)
	if err != nil {
		return nil, err
	}
	return tr, ch.SendRTS(dst, rts[:n])
}

// recv receives size bytes from src and checks them against pattern seed.
func recv(ch *lmttest.Channel, eng *lmt.Engine, src, size, seed int) error {
	rts, err := ch.NextRTS(src)
	if err != nil {
		return err
	}
	buf := make([]byte, size)
	tr, err := eng.StartRecv(src, rts, [][]byte{buf})
	if err != nil {
		return err
	}
	if err := ch.Wait(tr); err != nil {
		return fmt.Errorf("from rank %d: %w", src, err)
	}
	if err := lmttest.Check(buf, seed); err != nil {
		return fmt.Errorf("from rank %d: %w", src, err)
	}
	return nil
}

// TestPoolExhaustedWaits: rank 0 sends 1 MiB to rank 2 first, which rank
// 2 matches only after a message from rank 1, which rank 1 sends only once
// it has received 1 MiB from rank 0. Rank 0's first message fills early
// into the 4-slot pool before any CTS; were it allowed to take every slot,
// the second could never move and the job would hang. Every message
// arrives intact, and a pool far smaller than the messages only makes
// senders wait for the receivers to give slots back.
func TestPoolExhaustedWaits(t *testing.T) {
	const size = 1<<20 + 7
	job := lmttest.NewJob(3)
	name := launch.NewJobName()
	launchtest.RunOpts(t, 3, launchtest.Options{Setup: job.Setup, Job: name, Timeout: time.Minute}, func(p launch.Proc) error {
		ch, eng, err := lmttest.Open(p, lmt.Shm, tinyPool)
		if err != nil {
			return err
		}
		defer ch.Close()
		switch p.Rank {
		case 0:
			first, err := send(ch, eng, 2, size, 1)
			if err != nil {
				return err
			}
			second, err := send(ch, eng, 1, size, 2)
			if err != nil {
				return err
			}
			for _, tr := range []*lmt.Transfer{first, second} {
				if err := ch.Wait(tr); err != nil {
					return err
				}
			}
		case 1:
			if err := recv(ch, eng, 0, size, 2); err != nil {
				return err
			}
			tr, err := send(ch, eng, 2, size, 3)
			if err != nil {
				return err
			}
			return ch.Wait(tr)
		case 2:
			if err := recv(ch, eng, 1, size, 3); err != nil {
				return err
			}
			return recv(ch, eng, 0, size, 1)
		}
		return nil
	})
	if err := leftovers(name); err != nil {
		t.Error(err)
	}
}

// TestDeadReceiverReleasesSlots: rank 1 commits to messages from rank 0
// (its CTSs go out) and dies without reading them. The first, 128 KiB,
// fills rank 0's whole pool of 4 slots and completes for rank 0 as soon as
// it is in the ring (a buffered send), though the engine keeps it until
// the receiver's DONE; a second, 1 MiB, is cut short with an error naming
// rank 1. Rank 1's death fails both on rank 0's side, which gives their
// slots back: rank 0's 1 MiB to rank 2 afterwards needs them, and arrives
// intact.
func TestDeadReceiverReleasesSlots(t *testing.T) {
	const buffered, big = 128 << 10, 1 << 20
	for _, sizes := range [][]int{{buffered}, {buffered, big}} {
		t.Run(fmt.Sprint(len(sizes)), func(t *testing.T) { deadReceiver(t, sizes) })
	}
}

func deadReceiver(t *testing.T, sizes []int) {
	const big = 1 << 20
	job := lmttest.NewJob(3)
	name := launch.NewJobName()
	launchtest.RunOpts(t, 3, launchtest.Options{Setup: job.Setup, Job: name, Timeout: time.Minute, ExitEarly: []int{1}}, func(p launch.Proc) error {
		ch, eng, err := lmttest.Open(p, lmt.Shm, tinyPool)
		if err != nil {
			return err
		}
		defer ch.Close()
		switch p.Rank {
		case 0:
			var trs []*lmt.Transfer
			for i, size := range sizes {
				tr, err := send(ch, eng, 1, size, i)
				if err != nil {
					return err
				}
				if i == 0 {
					// Filled early into the pool before rank 1
					// opens the ring, so that the pair uses the
					// pool (see ring.go) and the message all of it.
					for tr.Moved() == 0 {
						if err := ch.Step(); err != nil {
							return err
						}
					}
					if err := ch.SendMsg(1, []byte("filled")); err != nil {
						return err
					}
					if err := ch.Wait(tr); err != nil {
						return fmt.Errorf("%d bytes to rank 1, buffered in the ring: %w", size, err)
					}
				}
				trs = append(trs, tr)
			}
			if err := ch.SendMsg(1, []byte("sent")); err != nil {
				return err
			}
			for _, tr := range trs[1:] {
				if err := ch.Wait(tr); err == nil || !strings.Contains(err.Error(), "rank 1") {
					return fmt.Errorf("send to rank 1, which died without reading: %v, want an error naming rank 1", err)
				}
			}
			tr, err := send(ch, eng, 2, big, 9)
			if err != nil {
				return err
			}
			return ch.Wait(tr)
		case 1:
			for _, size := range sizes {
				rts, err := ch.NextRTS(0) // before any CTS: nothing to read yet
				if err != nil {
					return err
				}
				if size == sizes[0] {
					if _, err := ch.NextMsg(0); err != nil { // "filled"
						return err
					}
				}
				if _, err := eng.StartRecv(0, rts, [][]byte{make([]byte, size)}); err != nil {
					return err
				}
			}
			for { // delivering packets, never progressing the engine
				if err := ch.Poll(); err != nil {
					return err
				}
				if _, ok := ch.TryMsg(0); ok {
					os.Exit(0) // with its CTSs out and nothing read
				}
			}
		case 2:
			return recv(ch, eng, 0, big, 9)
		}
		return nil
	})
	if err := leftovers(name); err != nil {
		t.Error(err)
	}
}

// TestFootprintMeasured: the footprint gives the size of a pool and a ring
// as the backend creates them, and the most the file system allocates for
// them (how much less depends on its accounting, not on the backend): all
// of the pool, the ring without its fixed slots, which stay sparse.
func TestFootprintMeasured(t *testing.T) {
	f := FootprintOf(lmt.Config{})
	if f.Pool != 2<<20+4096 || f.Ring != 4096 || f.FixedRing != 512<<10 {
		t.Fatalf("default footprint %+v, want 2 MiB of slots and a page of bitmap, 4 KiB rings and 512 KiB fixed slots", f)
	}
	if got, want := f.Job(192), uint64(192*(2<<20+4096)+192*191*4096); got != want {
		t.Fatalf("Job(192) = %d, want %d", got, want)
	}
	p, err := newPool("footprint", 0, lmt.DefaultShmPoolSlots, lmt.DefaultShmSlotSize)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	var st unix.Stat_t
	if err := unix.Fstat(p.fd, &st); err != nil {
		t.Fatal(err)
	}
	if uint64(st.Size) != f.Pool || uint64(st.Blocks*512) > f.Pool {
		t.Errorf("pool: %d bytes, %d allocated; footprint says %d, and no more allocated", st.Size, st.Blocks*512, f.Pool)
	}
	cfg := lmt.Config{Rank: 0, Size: 2, Job: launch.NewJobName()}
	c := cfg.WithDefaults()
	s := &shm{env: &lmt.Env{Rank: 0, Size: 2, Job: cfg.Job, Config: &c}, slots: uint64(c.ShmSlots), slotSize: c.ShmSlotSize, poolSlots: c.ShmPoolSlots, own: p}
	r, err := s.open(0, 1, streamRing)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(r.mem)
	if err := unix.Stat(r.path, &st); err != nil {
		t.Fatal(err)
	}
	unix.Unlink(r.path)
	if uint64(st.Size) != f.Ring+f.FixedRing || uint64(st.Blocks*512) > f.Ring {
		t.Errorf("ring: %d bytes, %d allocated; footprint says %d bytes of which %d allocated at most (the fixed slots stay sparse)", st.Size, st.Blocks*512, f.Ring+f.FixedRing, f.Ring)
	}
}
