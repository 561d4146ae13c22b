package cma

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/peerfault"
)

const (
	// maxRWCount is the kernel's MAX_RW_COUNT: one call never moves more.
	maxRWCount = 0x7ffff000
	// iovMax is IOV_MAX, the longest iovec list one call accepts.
	iovMax = 1024
	// probeAddr lies below vm.mmap_min_addr (64 KiB by default), so it is
	// never mapped: a 1-byte read there fails with EFAULT once the access
	// check passed, and with EPERM when it did not.
	probeAddr = 4096
)

func init() {
	register(lmt.CMA)
	register(lmt.CMAWrite)
	// cma-split: the receiver reads the first half while the sender
	// writes the second. One copy per byte like cma, but two CPUs copy at
	// once, as in the shm double copy (docs/performance.md has what that
	// gains).
	register(lmt.CMASplit)
	// multirail: cma-split cut by the speeds the receiver's engine
	// measured of the two rails with the peer (lmt.Weighed).
	register(lmt.MultiRail)
	// multirail-knem: multirail with the knem module's copy as a third
	// rail, which the Engine adds where the knem backend is registered
	// and works (lmt.Identity.Offload); multirail elsewhere.
	register(lmt.MultiRailKnem)
	// multirail-shm: multirail with the pair's shm ring as a third
	// rail, which the Engine adds where the shm backend is registered
	// and works (lmt.Identity.Ring).
	register(lmt.MultiRailShm)
}

// register registers the CMA backend name, whose identity gives its flow.
func register(name string) {
	id, _ := lmt.IdentityOf(name)
	lmt.Register(name, func(env *lmt.Env) (lmt.Backend, error) { return newCMA(env, id), nil }, cmaProber(name))
}

type cma struct {
	env    *lmt.Env
	name   string
	flow   lmt.Flow
	pids   []int // the pid each peer's handle named, per rank
	pid    int   // ours: getpid(2) is a system call, and it is in every handle
	pidns  uint64
	local  [iovMax]unix.Iovec
	remote [iovMax]unix.RemoteIovec
}

func newCMA(env *lmt.Env, id lmt.Identity) *cma {
	// With Yama ptrace_scope = 1 only a declared tracer may attach; every
	// rank declares "anyone", which is what CMA needs between siblings.
	// Without Yama the call fails with EINVAL, harmlessly.
	_ = unix.Prctl(unix.PR_SET_PTRACER, unix.PR_SET_PTRACER_ANY, 0, 0, 0)
	return &cma{env: env, name: id.Name, flow: id.Flow, pids: make([]int, env.Size), pid: os.Getpid(), pidns: pidNamespace()}
}

func (c *cma) Name() string { return c.name }

// Chunk implements lmt.Chunker.
func (c *cma) Chunk() int { return chunkOf(c.env.Config) }

func (c *cma) Check(peer lmt.Peer) error { return checkCMA(c.Name(), peer) }

func (c *cma) Handle(t *lmt.Transfer, dst []byte) (int, error) {
	return lmt.EncodeSegments(t, c.pid, c.pidns, dst)
}

func (c *cma) SetPeerHandle(t *lmt.Transfer, h []byte) error {
	pid, pidns, err := lmt.DecodeSegments(t, h)
	if err != nil {
		return err
	}
	if pidns != c.pidns {
		return &lmt.Unavailable{Backend: c.Name(), Peer: t.Peer(),
			Reason: fmt.Sprintf("the peer runs in another PID namespace (pid:[%d], here pid:[%d]), where its pid %d names another process", pidns, c.pidns, pid),
			Fix:    "start every rank in the same PID namespace"}
	}
	// The handle names the process whose memory the copy reads or
	// writes: it must be the peer's own, as the job knows it, or a
	// broken peer would have this process write into a third one.
	if known := c.env.PeerPID(t.Peer()); known != 0 && pid != known {
		return lmt.Corrupt(t.Peer(), c.Name()+" handle's pid", "%d, but rank %d is process %d", pid, t.Peer(), known)
	}
	c.pids[t.Peer()] = pid
	return nil
}

// pidNamespace returns the inode of this process's PID namespace.
func pidNamespace() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0
	}
	return st.Ino
}

func (c *cma) Start(t *lmt.Transfer) error { return nil }

func (c *cma) Step(t *lmt.Transfer, max int) (int, error) {
	max = min(max, maxRWCount)
	local, n := t.Iovecs(c.local[:], max)
	remote, _ := t.RemoteIovecs(c.remote[:], n)
	pid := c.pids[t.Peer()]
	var got int
	var err error
	// Whoever copies writes from its own buffer into the peer's when it
	// is the sender, and reads when it is the receiver.
	if t.Side() == lmt.Sender {
		got, err = processVM(unix.SYS_PROCESS_VM_WRITEV, pid, local, remote)
	} else {
		got, err = processVM(unix.SYS_PROCESS_VM_READV, pid, local, remote)
	}
	t.CountSyscalls(1)
	switch {
	case err == nil:
		return got, nil
	case err == unix.EINTR:
		return 0, nil
	case err == unix.ESRCH:
		return 0, peerfault.Dead(t.Peer(), pid, "", err)
	case err == unix.EPERM:
		return 0, checkCMA(c.Name(), lmt.Peer{Rank: t.Peer(), PID: pid})
	}
	return 0, fmt.Errorf("lmt: %s with rank %d (pid %d): %w", c.Name(), t.Peer(), pid, err)
}

// processVM is process_vm_readv or process_vm_writev (trap) made as a raw
// system call: one call copies at most Settings.Chunk bytes and never
// waits for another process, so the runtime need not be told, and
// entersyscall and exitsyscall would cost a measurable part of a 64 KiB
// copy (docs/performance.md).
func processVM(trap uintptr, pid int, local []unix.Iovec, remote []unix.RemoteIovec) (int, error) {
	if len(local) == 0 || len(remote) == 0 {
		return 0, nil
	}
	n, _, errno := unix.RawSyscall6(trap, uintptr(pid),
		uintptr(unsafe.Pointer(&local[0])), uintptr(len(local)),
		uintptr(unsafe.Pointer(&remote[0])), uintptr(len(remote)), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// Weighed implements lmt.Weighed: multirail's (and multirail-knem's and
// multirail-shm's) cut follows the rails' speeds, cma-split's stays at the
// half.
func (c *cma) Weighed() bool {
	return c.name == lmt.MultiRail || c.name == lmt.MultiRailKnem || c.name == lmt.MultiRailShm
}

func (c *cma) Abort(t *lmt.Transfer) {}
func (c *cma) Close() error          { return nil }

// cmaProber is the availability check of the CMA backend name: the three
// need the same access, and their refusals name the one asked about.
func cmaProber(name string) lmt.Prober {
	return func(_ *lmt.Config, peer lmt.Peer) error { return checkCMA(name, peer) }
}

// checkCMA probes whether this process may read peer's memory, and when
// not, finds the reason among those known to block CMA.
func checkCMA(name string, peer lmt.Peer) error {
	if peer.PID <= 0 {
		return &lmt.Unavailable{Backend: name, Peer: peer.Rank, Reason: "the peer's process id is unknown",
			Fix: "give the Engine a lmt.Config.PeerPID"}
	}
	var b [1]byte
	local := []unix.Iovec{{Base: &b[0], Len: 1}}
	remote := []unix.RemoteIovec{{Base: probeAddr, Len: 1}}
	_, err := unix.ProcessVMReadv(peer.PID, local, remote, 0)
	switch err {
	case nil, unix.EFAULT:
		return nil
	case unix.ESRCH:
		return &lmt.Unavailable{Backend: name, Peer: peer.Rank, Err: err,
			Reason: fmt.Sprintf("no process %d here: the peer exited, or runs in another PID namespace", peer.PID),
			Fix:    "start every rank in the same PID namespace"}
	case unix.ENOSYS:
		return &lmt.Unavailable{Backend: name, Peer: -1, Err: err,
			Reason: "process_vm_readv is not implemented (kernel without CONFIG_CROSS_MEMORY_ATTACH, or a seccomp filter answering ENOSYS)",
			Fix:    "use a kernel with CONFIG_CROSS_MEMORY_ATTACH=y and allow process_vm_readv/process_vm_writev in the seccomp profile"}
	case unix.EPERM:
		u := explainEPERM(name, peer)
		u.Err = err
		return u
	}
	return &lmt.Unavailable{Backend: name, Peer: peer.Rank, Err: err, Reason: "probe failed: " + err.Error()}
}

// explainEPERM names the first known cause of a refused ptrace access.
func explainEPERM(name string, peer lmt.Peer) *lmt.Unavailable {
	u := &lmt.Unavailable{Backend: name, Peer: peer.Rank}
	pid := strconv.Itoa(peer.PID)
	if self, err := os.ReadFile("/proc/self/uid_map"); err == nil {
		if other, err := os.ReadFile("/proc/" + pid + "/uid_map"); err == nil && string(self) != string(other) {
			u.Reason = "the peer runs in another user namespace (uid_map " + strings.Join(strings.Fields(string(other)), " ") +
				"), where this process has no CAP_SYS_PTRACE"
			u.Fix = "start every rank in the same user namespace, or read from the inner namespace toward the outer one only"
			return u
		}
	}
	peerUID, uidKnown := statusUID(pid)
	if uidKnown {
		var st syscall.Stat_t
		if err := syscall.Stat("/proc/"+pid, &st); err == nil && peerUID != 0 && st.Uid == 0 {
			// /proc/<pid> belongs to root when the task is not dumpable.
			u.Reason = "the peer is not dumpable (prctl(PR_SET_DUMPABLE, 0), a setuid/setgid exec or fs.suid_dumpable), and this process lacks CAP_SYS_PTRACE"
			u.Fix = "do not make the peer non-dumpable (prctl(PR_SET_DUMPABLE, 1)), or grant CAP_SYS_PTRACE"
			return u
		}
		if peerUID != os.Getuid() {
			u.Reason = fmt.Sprintf("the peer runs as uid %d, this process as uid %d without CAP_SYS_PTRACE", peerUID, os.Getuid())
			u.Fix = "run every rank under the same uid"
			return u
		}
	}
	// The kernel asks the LSMs, Yama among them, only once the checks
	// above have passed: a uid mismatch under Yama is still a uid
	// mismatch.
	if s, err := os.ReadFile(YamaScopeFile); err == nil {
		if v := strings.TrimSpace(string(s)); v != "0" {
			u.Reason, u.Fix = yamaReason(v)
			return u
		}
	}
	if s, err := os.ReadFile("/proc/self/status"); err == nil && strings.Contains(string(s), "Seccomp:\t2") {
		u.Reason = "a seccomp filter (container profile) denies process_vm_readv"
		u.Fix = "allow process_vm_readv/process_vm_writev in the profile (docker: --security-opt seccomp=<profile> or --cap-add SYS_PTRACE)"
		return u
	}
	if uidKnown && peerUID == os.Getuid() && !hasCap(unix.CAP_SYS_PTRACE) {
		u.Reason = fmt.Sprintf("the peer runs as uid %d like this process, so it is not dumpable (prctl(PR_SET_DUMPABLE, 0), setuid exec) or holds capabilities this process lacks, and this process has no CAP_SYS_PTRACE", peerUID)
		u.Fix = "keep the ranks dumpable and with the same capabilities, or grant CAP_SYS_PTRACE"
		return u
	}
	u.Reason = "the kernel refused ptrace access to the peer (an LSM such as SELinux or AppArmor?)"
	u.Fix = "allow ptrace read access between the ranks in the security policy"
	return u
}

// YamaScopeFile holds the Yama LSM's ptrace_scope; it exists only on
// kernels built with CONFIG_SECURITY_YAMA.
const YamaScopeFile = "/proc/sys/kernel/yama/ptrace_scope"

// yamaReason explains a refusal under Yama ptrace_scope v (not "0"). Each
// scope needs its own fix: the declaration that lifts scope 1 does nothing
// at scope 2, and scope 3 cannot be lowered before a reboot.
func yamaReason(v string) (reason, fix string) {
	const zero = "sysctl kernel.yama.ptrace_scope=0 (any process may then attach to those of its own uid)"
	switch v {
	case "1":
		return "Yama kernel.yama.ptrace_scope is 1: only an ancestor or a tracer the peer declared may attach, and the peer did not declare this process",
			"have the peer call prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY), as every rank running an lmt Engine does, or " + zero
	case "2":
		return "Yama kernel.yama.ptrace_scope is 2: only processes with CAP_SYS_PTRACE may attach, whatever the peer declared",
			"sysctl kernel.yama.ptrace_scope=1 (lmt ranks declare each other) or " + zero + ", or grant the ranks CAP_SYS_PTRACE"
	case "3":
		return "Yama kernel.yama.ptrace_scope is 3: no process may attach, and the setting holds until reboot",
			"boot with kernel.yama.ptrace_scope below 3 (sysctl.d), or use a backend without ptrace rights (shm, vmsplice, pipe)"
	}
	return "Yama kernel.yama.ptrace_scope is " + v + ", which restricts ptrace access", zero
}

// statusUID returns the real uid in /proc/<pid>/status.
func statusUID(pid string) (int, bool) {
	s, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(s), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" {
			uid, err := strconv.Atoi(f[1])
			return uid, err == nil
		}
	}
	return 0, false
}

// hasCap reports whether capability c is in this thread's effective set.
func hasCap(c int) bool {
	s, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(s), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && bits&(1<<c) != 0
		}
	}
	return false
}

// Datatypes implements lmt.Datatyped: process_vm_readv and
// process_vm_writev take the block lists of both sides as they come from
// the descriptions, and the handle carries the sender's (or, for
// cma-write, the receiver's) description.
func (c *cma) Datatypes() bool { return true }
