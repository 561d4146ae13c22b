package shm

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// mapRing maps the ring from src to dst of job as the engines will, with
// the default geometry, so that a test rank can overwrite its counters.
func mapRing(job string, src, dst int) ([]byte, string, error) {
	path := fmt.Sprintf("/dev/shm/knemesis-%s-lmt-%d-%d", job, src, dst)
	size := ringSize(lmt.DefaultShmSlots, lmt.DefaultShmSlotSize)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, "", err
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, "", err
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	return mem, path, err
}

func counter(mem []byte, off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&mem[off])) }

// leftovers fails unless /dev/shm holds nothing of job.
func leftovers(job string) error {
	m, err := filepath.Glob("/dev/shm/knemesis-" + job + "-*")
	if err != nil || len(m) != 0 {
		return fmt.Errorf("left in /dev/shm: %q (%v)", m, err)
	}
	return nil
}

// progressUntilDone progresses eng alone until tr completes and returns
// how many Progress calls that took, giving up after limit.
func progressUntilDone(eng *lmt.Engine, tr *lmt.Transfer, limit int) (int, error) {
	n := 0
	for ; !tr.Done() && n < limit; n++ {
		if err := eng.Progress(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// pollUntil delivers rank's control packets (never progressing the
// engine) until tr is done and rank's message arrived.
func pollUntil(ch *lmttest.Channel, tr *lmt.Transfer, rank int, want string) error {
	got := false
	for !got || tr != nil && !tr.Done() {
		if err := ch.Poll(); err != nil {
			return err
		}
		if m, ok := ch.TryMsg(rank); ok {
			if string(m) != want {
				return fmt.Errorf("rank %d said %q, want %q", rank, m, want)
			}
			got = true
		}
	}
	return nil
}

// TestCorruptWritten: the sender's written counter in the mapped ring
// says more slots are filled than the ring holds (or is behind the read
// one). The receiver's transfer fails in its first Progress, naming the
// sender and the counter, having moved nothing: it neither walks 2^64
// slots nor writes past its buffer. The sender learns it from the failed
// DONE, and nothing is left in /dev/shm.
func TestCorruptWritten(t *testing.T) {
	for _, w := range []uint64{lmt.DefaultShmSlots + 1, 1 << 40, math.MaxUint64} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			want := fmt.Sprintf("knemesis: rank 0 wrote a corrupt written counter of the shm ring from rank 0 to rank 1: %d with 0 read: not within the ring's 16 slots ahead of it", w)
			job := lmttest.NewJob(2)
			name := launch.NewJobName()
			launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Job: name, Timeout: time.Minute}, func(p launch.Proc) error {
				ch, eng, err := lmttest.Open(p, lmt.Shm, nil)
				if err != nil {
					return err
				}
				defer eng.Close()
				if p.Rank == 0 {
					return corruptWrittenSender(p, ch, eng, w, want)
				}
				r, err := ch.NextRTS(0)
				if err != nil {
					return err
				}
				buf := make([]byte, 1<<20)
				tr, err := eng.StartRecv(0, r, [][]byte{buf})
				if err != nil {
					return err
				}
				steps, err := progressUntilDone(eng, tr, 100)
				if err != nil {
					return err
				}
				var ce *lmt.CorruptError
				if steps != 1 || !errors.As(tr.Err(), &ce) || ce.Rank != 0 || tr.Err().Error() != want || tr.Moved() != 0 {
					return fmt.Errorf("receiver: %d Progress calls, %d bytes, error %v\nwant 1, 0, %s", steps, tr.Moved(), tr.Err(), want)
				}
				for i, b := range buf {
					if b != 0 {
						return fmt.Errorf("byte %d of the receive buffer written from a corrupt ring", i)
					}
				}
				if err := ch.SendMsg(0, []byte("checked")); err != nil {
					return err
				}
				// Rank 0 puts the counter back and sends again: the
				// ring stays refused, at the next Start, with the
				// same error.
				if r, err = ch.NextRTS(0); err != nil {
					return err
				}
				tr, err = eng.StartRecv(0, r, [][]byte{buf})
				if err != nil {
					return err
				}
				if !tr.Done() || tr.Err() == nil || tr.Err().Error() != want || tr.Moved() != 0 {
					return fmt.Errorf("receive on the ring found corrupt before: done %v, %d bytes, error %v\nwant done, 0, %s", tr.Done(), tr.Moved(), tr.Err(), want)
				}
				return ch.SendMsg(0, []byte("checked again"))
			})
			if err := leftovers(name); err != nil {
				t.Error(err)
			}
		})
	}
}

// corruptWrittenSender overwrites the written counter before sending, and
// never progresses its engine (which would write the counter again).
func corruptWrittenSender(p launch.Proc, ch *lmttest.Channel, eng *lmt.Engine, w uint64, want string) error {
	mem, path, err := mapRing(p.Job, 0, 1)
	if err != nil {
		return err
	}
	defer unix.Munmap(mem)
	defer unix.Unlink(path)
	counter(mem, offWritten).Store(w)
	rts := make([]byte, 4096)
	tr, n, err := eng.StartSend(1, [][]byte{lmttest.Message(1<<20, 3)}, lmt.Shm, rts)
	if err != nil {
		return err
	}
	if err := ch.SendRTS(1, rts[:n]); err != nil {
		return err
	}
	if err := pollUntil(ch, tr, 1, "checked"); err != nil {
		return err
	}
	var re *lmt.RemoteError
	if !errors.As(tr.Err(), &re) || re.Rank != 1 || re.Msg != want {
		return fmt.Errorf("sender: %v, want rank 1's failure %q", tr.Err(), want)
	}
	counter(mem, offWritten).Store(0)
	tr, n, err = eng.StartSend(1, [][]byte{lmttest.Message(1<<20, 3)}, lmt.Shm, rts)
	if err != nil {
		return err
	}
	if err := ch.SendRTS(1, rts[:n]); err != nil {
		return err
	}
	if err := pollUntil(ch, tr, 1, "checked again"); err != nil {
		return err
	}
	if !errors.As(tr.Err(), &re) || re.Rank != 1 || re.Msg != want {
		return fmt.Errorf("second send: %v, want rank 1's failure %q", tr.Err(), want)
	}
	return nil
}

// TestCorruptRead: the receiver's read counter in the mapped ring is
// ahead of what was written, or far behind. The sender's transfer fails in
// its first Progress (filling early, before any CTS), naming the receiver
// and the counter, instead of waiting for room for ever; it unlinks the
// ring, and nothing is left in /dev/shm.
func TestCorruptRead(t *testing.T) {
	for _, rd := range []uint64{1, 1 << 40} {
		t.Run(fmt.Sprint(rd), func(t *testing.T) {
			want := fmt.Sprintf("knemesis: rank 1 wrote a corrupt read counter of the shm ring from rank 0 to rank 1: %d with 0 written: not within the ring's 16 slots behind it", rd)
			job := lmttest.NewJob(2)
			name := launch.NewJobName()
			launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Job: name, Timeout: time.Minute}, func(p launch.Proc) error {
				ch, eng, err := lmttest.Open(p, lmt.Shm, nil)
				if err != nil {
					return err
				}
				defer eng.Close()
				if p.Rank == 1 {
					mem, path, err := mapRing(p.Job, 0, 1)
					if err != nil {
						return err
					}
					defer unix.Munmap(mem)
					defer unix.Unlink(path)
					counter(mem, offRead).Store(rd)
					if err := ch.SendMsg(0, []byte("corrupted")); err != nil {
						return err
					}
					return pollUntil(ch, nil, 0, "checked")
				}
				if m, err := ch.NextMsg(1); err != nil || string(m) != "corrupted" {
					return fmt.Errorf("rank 1 said %q (%v)", m, err)
				}
				rts := make([]byte, 4096)
				tr, _, err := eng.StartSend(1, [][]byte{lmttest.Message(1<<20, 3)}, lmt.Shm, rts)
				if err != nil {
					return err
				}
				steps, err := progressUntilDone(eng, tr, 100)
				if err != nil {
					return err
				}
				var ce *lmt.CorruptError
				if steps != 1 || !errors.As(tr.Err(), &ce) || ce.Rank != 1 || tr.Err().Error() != want || tr.Moved() != 0 {
					return fmt.Errorf("sender: %d Progress calls, %d bytes, error %v\nwant 1, 0, %s", steps, tr.Moved(), tr.Err(), want)
				}
				// The ring stays unusable: the next send to rank 1 fails
				// the same way rather than trusting it again.
				tr2, _, err := eng.StartSend(1, [][]byte{lmttest.Message(4096, 3)}, lmt.Shm, rts)
				if err != nil {
					return err
				}
				if _, err := progressUntilDone(eng, tr2, 100); err != nil || tr2.Err() == nil || tr2.Err().Error() != want {
					return fmt.Errorf("next send on the corrupt ring: %v (%v), want %s", tr2.Err(), err, want)
				}
				return ch.SendMsg(1, []byte("checked"))
			})
			if err := leftovers(name); err != nil {
				t.Error(err)
			}
		})
	}
}
