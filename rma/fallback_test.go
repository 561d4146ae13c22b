package rma_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/rma"
)

// denyCMA installs, on every thread, a seccomp filter that answers
// process_vm_readv and process_vm_writev with EPERM, as container profiles
// do.
func denyCMA() error {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_PROCESS_VM_READV, Jt: 1, Jf: 0},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: unix.SYS_PROCESS_VM_WRITEV, Jt: 0, Jf: 1},
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

// checkRefusal: toward peer, w's route is want, after refusals of which the
// last is the LMT's own for backend, word for word, with a reason
// containing reason.
func checkRefusal(w *rma.Window, peer int, want rma.Mechanism, backend, reason string) error {
	r := w.Route(peer)
	if r.Mechanism != want || len(r.Refused) == 0 {
		return fmt.Errorf("route to rank %d: %v, want %v after refusals", peer, r, want)
	}
	got := r.Refused[len(r.Refused)-1]
	var u *lmt.Unavailable
	if !errors.As(got, &u) || u.Backend != backend || !strings.Contains(u.Reason, reason) || u.Fix == "" {
		return fmt.Errorf("route to rank %d refused %v, want the LMT's Unavailable for %s naming %q, with a fix", peer, got, backend, reason)
	}
	pid, _ := w.Endpoint().PeerPID(peer)
	if lmtErr := lmt.Check(backend, lmt.Peer{Rank: peer, PID: pid}); lmtErr == nil || lmtErr.Error() != got.Error() {
		return fmt.Errorf("route's refusal %q differs from the LMT's %v", got, lmtErr)
	}
	return nil
}

// exchange has each rank put 1 MiB + 3 into the other's part and get it
// back, checked by checksum.
func exchange(p launch.Proc, w *rma.Window) error {
	const n = 1<<20 + 3
	peer := 1 - p.Rank
	buf := make([]byte, n)
	pattern(buf, 10+p.Rank)
	var op rma.Op
	if err := w.Put(&op, peer, 1, buf); err != nil {
		return err
	}
	if err := w.Wait(&op); err != nil {
		return err
	}
	if err := w.Fence(); err != nil {
		return err
	}
	if err := checkRange(w.Local(), 1, n, 10+peer, 0); err != nil {
		return fmt.Errorf("rank %d's put: %w", peer, err)
	}
	back := make([]byte, n)
	if err := w.Get(&op, peer, 1, back); err != nil {
		return err
	}
	if err := w.Wait(&op); err != nil {
		return err
	}
	if err := checkRange(back, 0, n, 10+p.Rank, 0); err != nil {
		return fmt.Errorf("get from rank %d: %w", peer, err)
	}
	return w.Fence()
}

// TestFallbackSeccomp: under a seccomp filter denying CMA, rank 1's
// operations toward rank 0 go by active messages, the refusal being the
// LMT's own naming seccomp; rank 0, unfiltered, uses CMA.
func TestFallbackSeccomp(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		if p.Rank == 1 {
			if err := denyCMA(); err != nil {
				return err
			}
		}
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		w, err := rma.Expose(ep, make([]byte, 2<<20), &rma.Options{Prefer: []rma.Mechanism{rma.CMA, rma.AM}})
		if err != nil {
			return err
		}
		if p.Rank == 0 {
			if r := w.Route(1); r.Mechanism != rma.CMA {
				return fmt.Errorf("route to rank 1 without a filter: %v, want cma", r)
			}
		} else if err := checkRefusal(w, 0, rma.AM, "cma", "seccomp"); err != nil {
			return err
		}
		if err := exchange(p, w); err != nil {
			return err
		}
		return w.Free()
	})
}

// TestFallbackUserNamespace: rank 1 runs in a user namespace of its own.
// Rank 0 may write into it with CMA; rank 1 may not write out of it, and
// falls back to active messages with the LMT's reason naming the user
// namespace.
func TestFallbackUserNamespace(t *testing.T) {
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		t.Skip("lacks user-namespaces: user namespaces are disabled here (user.max_user_namespaces)")
	}
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: func(rank int, cmd *exec.Cmd) error {
		if rank == 1 {
			cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: unix.Getuid(), Size: 1}}
			cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: unix.Getgid(), Size: 1}}
		}
		return nil
	}}, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		w, err := rma.Expose(ep, make([]byte, 2<<20), &rma.Options{Prefer: []rma.Mechanism{rma.CMA}})
		if err != nil {
			return err
		}
		if p.Rank == 0 {
			if r := w.Route(1); r.Mechanism != rma.CMA {
				return fmt.Errorf("route into the inner namespace: %v, want cma", r)
			}
		} else if err := checkRefusal(w, 0, rma.AM, "cma", "user namespace"); err != nil {
			return err
		}
		if err := exchange(p, w); err != nil {
			return err
		}
		return w.Free()
	})
}

// TestFallbackKnem: with the default preference an exposed window attaches
// the peer's knem region where the module is loaded with region attach (or
// copies through it, where the module lacks attach); where the module is
// not loaded, both knem mechanisms are refused with the LMT's reason,
// naming the missing module, and CMA carries the operations.
func TestFallbackKnem(t *testing.T) {
	_, statErr := os.Stat(knem.DevicePath)
	want := rma.KnemAttach
	if statErr == nil {
		d, err := knem.Open()
		if err != nil {
			t.Fatal(err)
		}
		info, err := d.Info()
		d.Close()
		if err != nil {
			t.Fatal(err)
		}
		if info.Features&knem.FeatureAttach == 0 {
			want = rma.Knem
		}
	}
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		w, err := rma.Expose(ep, make([]byte, 2<<20), nil)
		if err != nil {
			return err
		}
		r := w.Route(1 - p.Rank)
		switch {
		case statErr == nil && want == rma.KnemAttach:
			if r.Mechanism != want || len(r.Refused) != 0 {
				return fmt.Errorf("route with %s present: %v, want %v", knem.DevicePath, r, want)
			}
		case statErr == nil:
			if r.Mechanism != want || len(r.Refused) != 1 {
				return fmt.Errorf("route with %s lacking attach: %v, want %v after attach's refusal", knem.DevicePath, r, want)
			}
		default:
			if err := checkRefusal(w, 1-p.Rank, rma.CMA, "knem", "not loaded"); err != nil {
				return err
			}
			if len(r.Refused) != 2 || r.Refused[0].Error() != r.Refused[1].Error() {
				return fmt.Errorf("route %v: want knem-attach and knem refused, both for the missing module", r)
			}
		}
		if err := exchange(p, w); err != nil {
			return err
		}
		return w.Free()
	})
}
