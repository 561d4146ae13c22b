package yamatest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/knemesis/knemesis/cma"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	_ "github.com/knemesis/knemesis/shm" // the fallback when Yama refuses CMA
	"golang.org/x/sys/unix"
)

// nobody is the uid and gid every rank runs as: the same for both, so that
// only Yama stands between them, and unprivileged, so that no rank holds
// the CAP_SYS_PTRACE that Yama scopes 1 and 2 let through.
const nobody = 65534

// inGuest: the QEMU guests of ci/test-kernel.sh, where Yama must be present.
var inGuest = os.Getenv("KNEMESIS_KCI") != ""

// cmaBackends are the backends that need ptrace access to the peer.
var cmaBackends = []string{"cma", "cma-write", "cma-split"}

// withScope sets kernel.yama.ptrace_scope to scope for the test and puts
// the previous value back when it ends. Only the launching parent does it:
// the ranks, running as nobody, could not.
func withScope(t *testing.T, scope int) {
	t.Helper()
	if _, child := launch.Self(); child {
		return
	}
	if _, err := os.Stat("/proc/sys/kernel/yama"); errors.Is(err, os.ErrNotExist) {
		if inGuest {
			t.Fatal("no Yama LSM in the guest kernel: /proc/sys/kernel/yama absent (Debian kernels build CONFIG_SECURITY_YAMA)")
		}
		t.Skip("lacks yama: no Yama LSM: /proc/sys/kernel/yama absent")
	}
	if os.Geteuid() != 0 {
		if inGuest {
			t.Fatal("the guest tests run as root")
		}
		t.Skip("lacks root: sets kernel.yama.ptrace_scope and runs the ranks as uid 65534")
	}
	b, err := os.ReadFile(cma.YamaScopeFile)
	if err != nil {
		t.Fatal(err)
	}
	prev := strings.TrimSpace(string(b))
	if prev == "3" {
		// Scope 3 is final until reboot: no test can lower it.
		t.Skip("lacks yama-scope-lowerable: kernel.yama.ptrace_scope is 3 here, which cannot be lowered before a reboot")
	}
	setScope(t, strconv.Itoa(scope))
	t.Cleanup(func() { setScope(t, prev) })
	t.Logf("kernel.yama.ptrace_scope %s, set to %d for the test", prev, scope)
}

func setScope(t *testing.T, v string) {
	t.Helper()
	if err := os.WriteFile(cma.YamaScopeFile, []byte(v+"\n"), 0o644); err != nil {
		t.Fatalf("setting kernel.yama.ptrace_scope to %s: %v", v, err)
	}
	b, err := os.ReadFile(cma.YamaScopeFile)
	if err != nil || strings.TrimSpace(string(b)) != v {
		t.Fatalf("kernel.yama.ptrace_scope reads %q, %v after writing %s", b, err, v)
	}
}

// job runs fn in two ranks, both as uid and gid 65534, connected by an
// lmttest channel (process ids exchanged) and without an Engine yet.
func job(t *testing.T, fn func(p launch.Proc, ch *lmttest.Channel) error) {
	t.Helper()
	j := lmttest.NewJob(2)
	j.Extra = func(rank int, cmd *exec.Cmd) error {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
		return nil
	}
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: j.Setup}, func(p launch.Proc) error {
		if err := noPtraceCap(); err != nil {
			return err
		}
		ch, err := lmttest.Connect(p)
		if err != nil {
			return err
		}
		return fn(p, ch)
	})
}

// noPtraceCap fails when this process holds CAP_SYS_PTRACE, with which
// Yama would let every access through and the tests prove nothing.
func noPtraceCap() error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return fmt.Errorf("CapEff %q: %w", v, err)
			}
			if caps&(1<<unix.CAP_SYS_PTRACE) != 0 {
				return fmt.Errorf("rank runs as uid %d with CAP_SYS_PTRACE (CapEff %#x)", os.Getuid(), caps)
			}
			return nil
		}
	}
	return errors.New("no CapEff line in /proc/self/status")
}

// openEngine creates this rank's Engine, which declares every process a
// permitted tracer (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)).
func openEngine(p launch.Proc, ch *lmttest.Channel, prefer ...string) (*lmt.Engine, error) {
	cfg := ch.Config(p)
	cfg.Prefer = prefer
	eng, err := lmt.New(cfg)
	if err != nil {
		return nil, err
	}
	ch.Engine = eng
	return eng, nil
}

// wantYama checks that err is the refusal of backend by Yama at scope, with
// the kernel's EPERM behind it.
func wantYama(err error, backend, scope string, peer int) error {
	u, ok := err.(*lmt.Unavailable)
	if !ok {
		return fmt.Errorf("%s with rank %d at ptrace_scope %s: %v (%T), want an *lmt.Unavailable", backend, peer, scope, err, err)
	}
	if u.Err != unix.EPERM || u.Backend != backend || u.Peer != peer ||
		!strings.Contains(u.Reason, "Yama") || !strings.Contains(u.Reason, "ptrace_scope is "+scope) || u.Fix == "" {
		return fmt.Errorf("%s with rank %d at ptrace_scope %s: %#v, want Err EPERM and a reason naming Yama ptrace_scope %s, with a fix", backend, peer, scope, u, scope)
	}
	return nil
}

// TestScope1Undeclared: at scope 1 a sibling that declared no tracer
// refuses CMA, and the refusal names Yama; once the sibling starts an lmt
// Engine (which declares any tracer), the same check passes.
func TestScope1Undeclared(t *testing.T) {
	withScope(t, 1)
	job(t, func(p launch.Proc, ch *lmttest.Channel) error {
		peer := lmt.Peer{Rank: 0, PID: ch.PeerPID(0)}
		if p.Rank == 1 {
			err := lmt.Check("cma", peer)
			if err := wantYama(err, "cma", "1", 0); err != nil {
				return err
			}
			if u := err.(*lmt.Unavailable); !strings.Contains(u.Fix, "PR_SET_PTRACER") {
				return fmt.Errorf("fix %q does not name the declaration that lifts scope 1", u.Fix)
			}
			fmt.Printf("undeclared peer: %v\n", err)
		}
		if err := ch.Barrier(); err != nil {
			return err
		}
		if p.Rank == 0 {
			eng, err := openEngine(p, ch, "cma")
			if err != nil {
				return err
			}
			defer eng.Close()
		}
		if err := ch.Barrier(); err != nil {
			return err
		}
		if p.Rank == 1 {
			if err := lmt.Check("cma", peer); err != nil {
				return fmt.Errorf("peer running an Engine (declared tracer): %v, want CMA allowed", err)
			}
		}
		return ch.Barrier()
	})
}

// TestScope1Declared: at scope 1, between ranks that both run an Engine,
// every CMA flow carries a message: read (receiver attaches to the
// sender), write (sender to receiver) and split (both).
func TestScope1Declared(t *testing.T) {
	withScope(t, 1)
	job(t, func(p launch.Proc, ch *lmttest.Channel) error {
		eng, err := openEngine(p, ch, cmaBackends...)
		if err != nil {
			return err
		}
		defer eng.Close()
		// A sender checks its access to the receiver before its RTS:
		// both must have declared before either sends.
		if err := ch.Barrier(); err != nil {
			return err
		}
		// 8 MiB + 3 bytes in 4 MiB chunks (cma.Settings.Chunk), one
		// process_vm_readv or writev per chunk from contiguous buffers:
		// 3 calls by the side that copies; cma-split's receiver reads
		// the first 4 MiB (1) and its sender writes the rest (2).
		const size = 8<<20 + 3
		calls := map[string][2]int{"cma": {0, 3}, "cma-write": {3, 0}, "cma-split": {2, 1}}
		for _, b := range cmaBackends {
			st, err := message(ch, eng, b, 0, 1, size)
			if err != nil {
				return fmt.Errorf("%s: %w", b, err)
			}
			if want := calls[b][p.Rank]; st.Syscalls != want || st.Chunks != want {
				return fmt.Errorf("%s: rank %d made %d system calls in %d chunks, want %d of each", b, p.Rank, st.Syscalls, st.Chunks, want)
			}
		}
		return ch.Barrier()
	})
}

// TestScope2: at scope 2 only CAP_SYS_PTRACE attaches: ranks that declared
// each other are still refused, with the Yama reason, for every CMA flow
// and for multirail (cma-split cut by its rails' speeds), and the Engine
// falls back to the next backend of its preference, shm.
func TestScope2(t *testing.T) {
	withScope(t, 2)
	job(t, func(p launch.Proc, ch *lmttest.Channel) error {
		refused := append(append([]string(nil), cmaBackends...), lmt.MultiRail)
		prefer := append(append([]string(nil), refused...), "shm")
		eng, err := openEngine(p, ch, prefer...)
		if err != nil {
			return err
		}
		defer eng.Close()
		// The Engine ignores the prctl's result; here it must succeed,
		// or the refusal below would prove nothing about scope 2.
		if err := unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_PTRACER, ANY): %w", err)
		}
		if err := ch.Barrier(); err != nil {
			return err
		}
		other := 1 - p.Rank
		for _, b := range refused {
			if err := wantYama(eng.Check(b, other), b, "2", other); err != nil {
				return fmt.Errorf("%s: %w", b, err)
			}
		}
		if p.Rank == 0 {
			fmt.Printf("declared peer at scope 2: %v\n", eng.Check("cma", other))
		}
		for _, dir := range [][2]int{{0, 1}, {1, 0}} {
			st, err := message(ch, eng, "", dir[0], dir[1], 1<<20+3)
			if err != nil {
				return fmt.Errorf("message %d→%d: %w", dir[0], dir[1], err)
			}
			if st.Backend != "shm" {
				return fmt.Errorf("message %d→%d went via %s, want the fallback shm", dir[0], dir[1], st.Backend)
			}
		}
		return ch.Barrier()
	})
}

// message sends size bytes from rank src to rank dst through backend (""
// lets the Engine choose) and returns this side's statistics. The receiver
// checks the content byte for byte, the guards around its buffer, and the
// CRC-32 the sender computed over what it sent.
func message(ch *lmttest.Channel, eng *lmt.Engine, backend string, src, dst, size int) (lmt.Stats, error) {
	rts := make([]byte, 4096)
	if ch.Rank == src {
		b := lmttest.NewBuffer(size, 1, false)
		b.FillMessage()
		var sum [4]byte
		binary.LittleEndian.PutUint32(sum[:], crc(b.Iov))
		t, n, err := eng.StartSend(dst, b.Iov, backend, rts)
		if err != nil {
			return lmt.Stats{}, err
		}
		if err := ch.SendRTS(dst, rts[:n]); err != nil {
			return lmt.Stats{}, err
		}
		if err := ch.SendMsg(dst, sum[:]); err != nil {
			return lmt.Stats{}, err
		}
		err = ch.Wait(t)
		return t.Stats(), err
	}
	r, err := ch.NextRTS(src)
	if err != nil {
		return lmt.Stats{}, err
	}
	b := lmttest.NewBuffer(size, 3, false)
	t, err := eng.StartRecv(src, r, b.Iov)
	if err != nil {
		return lmt.Stats{}, err
	}
	if err := ch.Wait(t); err != nil {
		return t.Stats(), err
	}
	if err := b.Verify(size); err != nil {
		return t.Stats(), err
	}
	sum, err := ch.NextMsg(src)
	if err != nil {
		return t.Stats(), err
	}
	if got, want := crc(b.Iov), binary.LittleEndian.Uint32(sum); got != want {
		return t.Stats(), fmt.Errorf("CRC-32 of the received payload %#08x, the sender's %#08x", got, want)
	}
	st := t.Stats()
	if st.Bytes != int64(size) || backend != "" && st.Backend != backend {
		return st, fmt.Errorf("receiver stats %+v, want %d bytes via %q", st, size, backend)
	}
	return st, nil
}

func crc(iov [][]byte) uint32 {
	var c uint32
	for _, s := range iov {
		c = crc32.Update(c, crc32.IEEETable, s)
	}
	return c
}
