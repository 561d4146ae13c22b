package lmt_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"golang.org/x/sys/unix"
)

// oneMessage sends 1 MiB + 3 from src to dst with the engine's own choice
// of backend and returns the backend that carried it (checked content).
func oneMessage(ch *lmttest.Channel, eng *lmt.Engine, src, dst int) (string, error) {
	rts := make([]byte, 4096)
	c := lmttest.Case{Size: 1<<20 + 3, SendOff: 1, RecvIov: true}
	if ch.Rank == src {
		b := lmttest.NewBuffer(c.Size, c.SendOff, c.SendIov)
		b.FillMessage()
		t, n, err := eng.StartSend(dst, b.Iov, "", rts)
		if err != nil {
			return "", err
		}
		if err := ch.SendRTS(dst, rts[:n]); err != nil {
			return "", err
		}
		err = ch.Wait(t)
		return t.Backend(), err
	}
	r, err := ch.NextRTS(src)
	if err != nil {
		return "", err
	}
	b := lmttest.NewBuffer(c.Size, c.RecvOff, c.RecvIov)
	t, err := eng.StartRecv(src, r, b.Iov)
	if err != nil {
		return "", err
	}
	if err := ch.Wait(t); err != nil {
		return "", err
	}
	return t.Backend(), b.Verify(c.Size)
}

// TestCMAUserNamespace: rank 1 runs in a user namespace of its own. CMA works
// from rank 0 into it (root of the parent namespace holds CAP_SYS_PTRACE
// over it) but not the other way. A message rank 0 sends with cma first in
// its preference is refused by rank 1, which falls back to shm in its CTS.
func TestCMAUserNamespace(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		t.Skip("lacks user-namespaces: user namespaces are disabled here (user.max_user_namespaces)")
	}
	job := lmttest.NewJob(2)
	job.Extra = func(rank int, cmd *exec.Cmd) error {
		if rank == 1 {
			cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: unix.Getuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: unix.Getgid(), Size: 1}}
		}
		return nil
	}
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup}, func(p launch.Proc) error {
		ch, eng, err := lmttest.Open(p, "", func(c *lmt.Config) { c.Prefer = []string{"cma", "shm"} })
		if err != nil {
			return err
		}
		defer ch.Close()
		err = eng.Check("cma", 1-p.Rank)
		if p.Rank == 0 && err != nil {
			return fmt.Errorf("rank 0 into the inner namespace: %v, want CMA allowed", err)
		}
		var u *lmt.Unavailable
		if p.Rank == 1 && (!errors.As(err, &u) || !strings.Contains(u.Reason, "user namespace") || u.Fix == "" || !errors.Is(err, unix.EPERM)) {
			return fmt.Errorf("rank 1 toward the outer namespace: %v, want Unavailable naming the user namespace, with a fix", err)
		}
		fmt.Printf("rank %d: %v\n", p.Rank, err)
		for _, dir := range [][2]int{{0, 1}, {1, 0}} {
			b, err := oneMessage(ch, eng, dir[0], dir[1])
			if err != nil {
				return err
			}
			if b != "shm" {
				return fmt.Errorf("message %d→%d went via %s, want the fallback shm", dir[0], dir[1], b)
			}
		}
		return nil
	})
}

// dropPtraceCap removes CAP_SYS_PTRACE from every thread of the process.
func dropPtraceCap() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	const bit = 1 << unix.CAP_SYS_PTRACE
	data[0].Effective &^= bit
	data[0].Permitted &^= bit
	data[0].Inheritable &^= bit
	_, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	if e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}

// TestCMANonDumpable: rank 0 makes itself non-dumpable. Whether CMA still
// works depends on CAP_SYS_PTRACE: root keeps it working (the kernel checks
// dumpability only for callers without the capability); once both ranks drop
// the capability, rank 1 is refused with a reason naming dumpability, and
// messages fall back to shm.
func TestCMANonDumpable(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("lacks root: the test compares CMA with and without CAP_SYS_PTRACE")
	}
	for _, drop := range []bool{false, true} {
		t.Run(fmt.Sprintf("drop-CAP_SYS_PTRACE=%v", drop), func(t *testing.T) {
			job := lmttest.NewJob(2)
			launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup}, func(p launch.Proc) error {
				if drop {
					if err := dropPtraceCap(); err != nil {
						return err
					}
				}
				ch, eng, err := lmttest.Open(p, "", func(c *lmt.Config) { c.Prefer = []string{"cma", "shm"} })
				if err != nil {
					return err
				}
				defer ch.Close()
				peer := lmt.Peer{Rank: 0, PID: ch.PeerPID(0)}
				if p.Rank == 1 {
					if err := lmt.Check("cma", peer); err != nil {
						return fmt.Errorf("dumpable peer: %v, want CMA allowed", err)
					}
				}
				if err := ch.Barrier(); err != nil {
					return err
				}
				if p.Rank == 0 {
					if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
						return err
					}
				}
				if err := ch.Barrier(); err != nil {
					return err
				}
				want := "cma"
				if p.Rank == 1 {
					err := lmt.Check("cma", peer)
					fmt.Printf("non-dumpable peer, drop=%v: %v\n", drop, err)
					var u *lmt.Unavailable
					switch {
					case !drop && err != nil:
						return fmt.Errorf("non-dumpable peer, CAP_SYS_PTRACE held: %v, want CMA allowed", err)
					case drop && (!errors.As(err, &u) || !strings.Contains(u.Reason, "dumpable")):
						return fmt.Errorf("non-dumpable peer without CAP_SYS_PTRACE: %v, want Unavailable naming dumpability", err)
					}
				}
				if drop {
					want = "shm"
				}
				b, err := oneMessage(ch, eng, 0, 1)
				if err != nil {
					return err
				}
				if b != want {
					return fmt.Errorf("message went via %s, want %s", b, want)
				}
				return ch.Barrier()
			})
		})
	}
}

// TestCheckErrors: unknown backends and peers are named.
func TestCheckErrors(t *testing.T) {
	if err := lmt.Check("knem", lmt.Peer{}); err == nil || !strings.Contains(err.Error(), `"knem"`) {
		t.Errorf("Check(knem) = %v, want an error naming it", err)
	}
	var u *lmt.Unavailable
	if err := lmt.Check("cma", lmt.Peer{Rank: 1}); !errors.As(err, &u) || u.Peer != 1 {
		t.Errorf("Check(cma) without a pid = %v, want Unavailable for rank 1", err)
	}
	// A pid that names no process here: gone, or in another PID namespace.
	if err := lmt.Check("cma", lmt.Peer{Rank: 1, PID: 1 << 22}); !errors.As(err, &u) || !errors.Is(err, unix.ESRCH) || !strings.Contains(u.Reason, "PID namespace") {
		t.Errorf("Check(cma) on a pid not running = %v, want Unavailable (ESRCH) naming both causes", err)
	}
	if got := lmt.Backends(); strings.Join(got, ",") != "shm,cma,cma-write,pipe,cma-split,multirail,multirail-knem,multirail-shm" {
		t.Errorf("Backends() = %v, want this package's and pipe's (imported by the example), vmsplice not imported", got)
	}
}

// TestCMAPIDNamespace: rank 1 runs in a PID namespace of its own, where its
// pid (1) names another process (init) in rank 0's. The handle carries the
// namespace, so neither side reads through a pid that is not its peer's:
// both directions fall back to shm.
func TestCMAPIDNamespace(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("lacks root: needs CAP_SYS_ADMIN to start a rank in a new PID namespace")
	}
	job := lmttest.NewJob(2)
	job.Extra = func(rank int, cmd *exec.Cmd) error {
		if rank == 1 {
			cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
		}
		return nil
	}
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup}, func(p launch.Proc) error {
		ch, eng, err := lmttest.Open(p, "", func(c *lmt.Config) { c.Prefer = []string{"cma", "shm"} })
		if err != nil {
			return err
		}
		defer ch.Close()
		if p.Rank == 1 && unix.Getpid() != 1 {
			return fmt.Errorf("rank 1 has pid %d, not 1: no new PID namespace", unix.Getpid())
		}
		for _, dir := range [][2]int{{0, 1}, {1, 0}} {
			b, err := oneMessage(ch, eng, dir[0], dir[1])
			if err != nil {
				return err
			}
			if b != "shm" {
				return fmt.Errorf("message %d→%d went via %s, want the fallback shm", dir[0], dir[1], b)
			}
		}
		return nil
	})
}

// denyCMA installs, on every thread, a seccomp filter that answers
// process_vm_readv with EPERM, as container profiles do.
func denyCMA() error {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_PROCESS_VM_READV, Jt: 0, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}

// TestCMASeccomp: a seccomp filter denying process_vm_readv in rank 1 is
// named as the reason, and rank 1 falls back to shm for what rank 0 sends.
func TestCMASeccomp(t *testing.T) {
	job := lmttest.NewJob(2)
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup}, func(p launch.Proc) error {
		if p.Rank == 1 {
			if err := denyCMA(); err != nil {
				return err
			}
		}
		ch, eng, err := lmttest.Open(p, "", func(c *lmt.Config) { c.Prefer = []string{"cma", "shm"} })
		if err != nil {
			return err
		}
		defer ch.Close()
		err = eng.Check("cma", 1-p.Rank)
		var u *lmt.Unavailable
		if p.Rank == 0 && err != nil {
			return fmt.Errorf("rank 0, no filter: %v", err)
		}
		if p.Rank == 1 && (!errors.As(err, &u) || !strings.Contains(u.Reason, "seccomp")) {
			return fmt.Errorf("rank 1 under the filter: %v, want Unavailable naming seccomp", err)
		}
		b, err := oneMessage(ch, eng, 0, 1)
		if err != nil {
			return err
		}
		if b != "shm" {
			return fmt.Errorf("message went via %s, want the fallback shm", b)
		}
		return nil
	})
}
