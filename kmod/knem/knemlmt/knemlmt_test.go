package knemlmt_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/knemesis/knemesis/internal/exitwait"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/knemtest"
	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/kmod/knem/internal/pins"
	"github.com/knemesis/knemesis/kmod/knem/knemlmt"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// These tests need /dev/knem: they run in the QEMU guests of make
// test-kernel, where KNEMESIS_KCI=1 and nothing may skip.

func needDevice(t *testing.T) (dma bool) {
	t.Helper()
	return knemtest.HasDMA(t, knemtest.Open(t))
}

// policies are the receiver's ways to copy; each child process sets the
// same one, since it re-runs the same (sub)test.
func policies(t *testing.T, dma bool) map[string]knemlmt.Policy {
	always := func(int) bool { return true }
	never := func(int) bool { return false }
	p := map[string]knemlmt.Policy{
		"sync":  {AsyncMin: 1 << 62, DMA: never},
		"async": {AsyncMin: 1, DMA: never},
	}
	if dma {
		p["dma-sync"] = knemlmt.Policy{AsyncMin: 1 << 62, DMA: always}
		p["dma-async"] = knemlmt.Policy{AsyncMin: 1, DMA: always}
		// The default: threshold.DecideCopy above this machine's DMA_min.
		p["ioat"] = knemlmt.Policy{}
	}
	return p
}

// eachPolicy runs fn under every policy, or under those named.
func eachPolicy(t *testing.T, fn func(t *testing.T), only ...string) {
	dma := needDevice(t)
	for name, p := range policies(t, dma) {
		if len(only) > 0 && !slices.Contains(only, name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			knemlmt.SetPolicy(p)
			defer knemlmt.SetPolicy(knemlmt.Policy{})
			fn(t)
		})
	}
}

// TestMatrix runs the shapes of lmttest's matrix (aligned or not, one
// segment or many with empty ones, on each side) over sizes around the page
// and the chunk, then one large message, for every policy; the 64 MiB
// message once, asynchronously. The sizes are fewer than lmttest.Sizes:
// the guests emulate their CPU, and every policy goes through the same
// pinning and copy code for all sizes above a page.
func TestMatrix(t *testing.T) {
	eachPolicy(t, func(t *testing.T) {
		// The DMA engine sees page lists only: fewer shapes do.
		sizes := []int{0, 1, 4095, 4097, 65537, 1<<20 + 3}
		if strings.Contains(t.Name(), "dma") {
			sizes = []int{4097, 1<<20 + 3}
		}
		big := []lmttest.Case{{Size: 16<<20 + 3, SendOff: 1, RecvIov: true}}
		if strings.HasSuffix(t.Name(), "/async") {
			big = append(big, lmttest.Case{Size: 64<<20 + 5, SendIov: true, RecvOff: 3})
		}
		job := lmttest.NewJob(2)
		launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Timeout: 3 * time.Minute}, func(p launch.Proc) error {
			ch, eng, err := lmttest.Open(p, knemlmt.Name, nil)
			if err != nil {
				return err
			}
			defer eng.Close()
			for _, c := range append(lmttest.Cases(sizes), big...) {
				if err := lmttest.Transfer(ch, eng, knemlmt.Name, 0, 1, c); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

func TestTruncation(t *testing.T) {
	eachPolicy(t, func(t *testing.T) { lmttest.RunTruncation(t, knemlmt.Name) })
}

// TestManyPairs: 4 processes, every one sending to every other at once,
// with the CPU in the caller and with the DMA engine completing
// asynchronously (the two ends of the policy range; 3 MiB messages).
func TestManyPairs(t *testing.T) {
	eachPolicy(t, func(t *testing.T) { lmttest.RunManyPairs(t, knemlmt.Name) }, "sync", "dma-async")
}

// TestSenderGoneBeforeCopy: the sender exits after its RTS left; its region
// went with it, and the receiver's transfer fails naming the rank.
func TestSenderGoneBeforeCopy(t *testing.T) {
	needDevice(t)
	job := lmttest.NewJob(2)
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, ExitEarly: []int{0}}, func(p launch.Proc) error {
		ch, eng, err := lmttest.Open(p, knemlmt.Name, nil)
		if err != nil {
			return err
		}
		rts := make([]byte, 4096)
		b := lmttest.NewBuffer(1<<20, 0, false)
		if p.Rank == 0 {
			b.FillMessage()
			_, n, err := eng.StartSend(1, b.Iov, knemlmt.Name, rts)
			if err != nil {
				return err
			}
			if err := ch.SendRTS(1, rts[:n]); err != nil {
				return err
			}
			os.Exit(0) // with the region still declared
		}
		r, err := ch.NextRTS(0)
		if err != nil {
			return err
		}
		pid := ch.PeerPID(0)
		if err := exitwait.Wait(pid); err != nil {
			return fmt.Errorf("rank 0: %w", err)
		}
		tr, err := eng.StartRecv(0, r, b.Iov)
		if err != nil {
			return err
		}
		err = ch.Wait(tr)
		if err == nil || !strings.Contains(err.Error(), "rank 0") {
			return fmt.Errorf("receive from an exited sender: %v, want an error naming rank 0", err)
		}
		return eng.Close()
	})
}

// TestReceiverDiesDuringAsyncCopy: the receiver exits with a 64 MiB copy on
// the kernel thread; the sender's transfer fails naming it, and once both
// are gone no page stays pinned.
func TestReceiverDiesDuringAsyncCopy(t *testing.T) {
	needDevice(t)
	knemlmt.SetPolicy(knemlmt.Policy{AsyncMin: 1})
	defer knemlmt.SetPolicy(knemlmt.Policy{})
	job := lmttest.NewJob(2)
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Timeout: 2 * time.Minute, ExitEarly: []int{1}}, func(p launch.Proc) error {
		ch, eng, err := lmttest.Open(p, knemlmt.Name, nil)
		if err != nil {
			return err
		}
		rts := make([]byte, 4096)
		b := lmttest.NewBuffer(64<<20, 0, false)
		if p.Rank == 0 {
			tr, n, err := eng.StartSend(1, b.Iov, knemlmt.Name, rts)
			if err != nil {
				return err
			}
			if err := ch.SendRTS(1, rts[:n]); err != nil {
				return err
			}
			err = ch.Wait(tr)
			if err == nil || !strings.Contains(err.Error(), "rank 1") {
				return fmt.Errorf("send to a receiver that died: %v, want an error naming rank 1", err)
			}
			return eng.Close()
		}
		r, err := ch.NextRTS(0)
		if err != nil {
			return err
		}
		tr, err := eng.StartRecv(0, r, b.Iov)
		if err != nil {
			return err
		}
		if err := eng.Progress(); err != nil { // submits the copy
			return err
		}
		if tr.Done() {
			return fmt.Errorf("a 64 MiB copy on the kernel thread finished within one Progress")
		}
		os.Exit(0)
		return nil
	})
	if _, child := launch.Self(); child {
		return
	}
	if os.Geteuid() == 0 {
		if err := pins.WaitZero(30 * time.Second); err != nil {
			t.Fatalf("after both processes ended: %v", err)
		}
	}
}

func TestUnavailableWithoutDevice(t *testing.T) {
	if _, err := os.Stat(knem.DevicePath); err == nil {
		err := lmt.Check(knemlmt.Name, lmt.Peer{Rank: 1, PID: os.Getpid()})
		if err != nil {
			t.Fatalf("Check with %s present: %v", knem.DevicePath, err)
		}
		return
	}
	err := lmt.Check(knemlmt.Name, lmt.Peer{Rank: 1, PID: os.Getpid()})
	var u *lmt.Unavailable
	if !errors.As(err, &u) || !strings.Contains(u.Reason, "not loaded") || u.Fix == "" {
		t.Fatalf("Check without the module: %v, want an Unavailable naming the missing module and the fix", err)
	}
}

// TestMemlockSharedByUser: eight ranks of one user without CAP_IPC_LOCK,
// at Debian's default RLIMIT_MEMLOCK of 8 MiB, which the driver charges
// to the user, all eight together. First every rank sends 1 MiB to the
// next at once (eight pins that cannot all fit with the receivers' own:
// some go through knem, the others fall back), then rank 0 sends 64 MiB,
// eight times the limit, to rank 1 (one such message: the guests emulate
// their CPU): the sender cannot pin it, says so in its handle, and the
// receiver settles on cma-write. Every message arrives intact.
func TestMemlockSharedByUser(t *testing.T) {
	needDevice(t)
	if os.Geteuid() != 0 {
		t.Skip("lacks root: the test gives up CAP_IPC_LOCK (the QEMU guests run as root)")
	}
	const ranks, limit = 8, 8 << 20
	job := lmttest.NewJob(ranks)
	opts := launchtest.Options{Setup: job.Setup, Timeout: 5 * time.Minute}
	launchtest.RunOpts(t, ranks, opts, func(p launch.Proc) error {
		if err := dropIPCLockAllThreads(); err != nil {
			return err
		}
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
			return fmt.Errorf("RLIMIT_MEMLOCK of 8 MiB: %w", err)
		}
		ch, eng, err := lmttest.Open(p, "", func(c *lmt.Config) {
			c.Prefer = []string{knemlmt.Name, lmt.CMAWrite}
		})
		if err != nil {
			return err
		}
		defer eng.Close()
		next, prev := (p.Rank+1)%ranks, (p.Rank+ranks-1)%ranks
		if err := ringRound(ch, eng, next, prev, 1<<20, true, true); err != nil {
			return fmt.Errorf("1 MiB from every rank at once: %w", err)
		}
		if err := ringRound(ch, eng, next, prev, 64<<20, p.Rank == 0, p.Rank == 1); err != nil {
			return fmt.Errorf("64 MiB from rank 0: %w", err)
		}
		return ch.Barrier()
	})
}

// ringRound sends n bytes to next (when send) and receives n bytes from
// prev (when recv), checking the data; a 64 MiB message must have fallen
// back to cma-write.
func ringRound(ch *lmttest.Channel, eng *lmt.Engine, next, prev, n int, send, recv bool) error {
	var st *lmt.Transfer
	if send {
		rts := make([]byte, 4096)
		b := lmttest.NewBuffer(n, 0, false)
		b.FillMessage()
		tr, k, err := eng.StartSend(next, b.Iov, knemlmt.Name, rts)
		if err != nil {
			return fmt.Errorf("StartSend: %w", err)
		}
		if err := ch.SendRTS(next, rts[:k]); err != nil {
			return err
		}
		st = tr
	}
	if recv {
		r, err := ch.NextRTS(prev)
		if err != nil {
			return err
		}
		b := lmttest.NewBuffer(n, 0, false)
		tr, err := eng.StartRecv(prev, r, b.Iov)
		if err != nil {
			return fmt.Errorf("StartRecv: %w", err)
		}
		if err := ch.Wait(tr); err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		if err := b.Verify(n); err != nil {
			return err
		}
		if got := tr.Stats().Backend; n > 8<<20 && got != lmt.CMAWrite {
			return fmt.Errorf("a %d-byte message over the user's limit went through %s, want the fallback %s", n, got, lmt.CMAWrite)
		}
	}
	if st != nil {
		if err := ch.Wait(st); err != nil {
			return fmt.Errorf("send: %w", err)
		}
	}
	return nil
}

// dropIPCLockAllThreads removes CAP_IPC_LOCK from the effective set of
// every thread of the process (capabilities are per thread), so that the
// driver charges its pins to the user's RLIMIT_MEMLOCK as for a non-root
// rank.
func dropIPCLockAllThreads() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[unix.CAP_IPC_LOCK/32].Effective &^= 1 << (unix.CAP_IPC_LOCK % 32)
	_, _, errno := syscall.AllThreadsSyscall(unix.SYS_CAPSET,
		uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	if errno != 0 {
		return fmt.Errorf("capset without CAP_IPC_LOCK on every thread: %w", errno)
	}
	return nil
}
