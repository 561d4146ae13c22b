package knem

// A randomized ioctl stress, bounded in time: three processes (one of
// another uid) issue random commands with random flags, lengths, offsets,
// addresses and cookies, trading cookies through the board, closing
// descriptors with copies in flight. Every error must be one the ABI
// documents, copies of known data interleaved with the noise must stay
// exact, and once all processes are gone no page may remain pinned.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// stressTime is how long each stress process runs: KNEM_STRESS (a Go
// duration) or 20s.
func stressTime() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("KNEM_STRESS")); err == nil {
		return d
	}
	return 20 * time.Second
}

func TestRandomIoctlStress(t *testing.T) {
	run := func(p launch.Proc, b board) error { return newStressor(p, b).run(stressTime()) }
	if _, child := launch.Self(); child {
		job(t, 3, []int{2}, run)
		return
	}
	open(t)
	waitUnpinned(t, "before the stress (an earlier test leaked)")
	job(t, 3, []int{2}, run)
	waitUnpinned(t, "after the stress processes exited")
}

// documented are the errnos the ABI allows a command to fail with.
var documented = map[unix.Errno]bool{
	unix.EINVAL: true, unix.EFAULT: true, unix.EACCES: true, unix.EPERM: true,
	unix.ENOSYS: true, unix.EBUSY: true, unix.ENOMEM: true, unix.EAGAIN: true,
	unix.ENOSPC: true, // the per-user region limit (module parameter max_user_regions)
}

type stressDev struct {
	d       *Device
	s       *StatusArray
	cookies []Cookie
}

type stressor struct {
	r    *rand.Rand
	p    launch.Proc
	b    board
	pool [][]byte // heap buffers the kernel may write for the whole run
	ro   []byte   // read-only mapping
	none []byte   // PROT_NONE mapping
	devs []*stressDev
	seed uint64

	ops    map[string]int
	errnos map[string]int
}

func newStressor(p launch.Proc, b board) *stressor {
	seed := uint64(time.Now().UnixNano())
	st := &stressor{
		r: rand.New(rand.NewPCG(seed, uint64(p.Rank))), p: p, b: b, seed: seed,
		ops: map[string]int{}, errnos: map[string]int{},
	}
	for range 24 {
		st.pool = append(st.pool, make([]byte, 1+st.r.IntN(256<<10)))
	}
	return st
}

func (st *stressor) run(dur time.Duration) (err error) {
	if st.ro, err = unix.Mmap(-1, 0, 64<<10, unix.PROT_READ, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
		return err
	}
	if st.none, err = unix.Mmap(-1, 0, 16<<10, unix.PROT_NONE, unix.MAP_ANON|unix.MAP_PRIVATE); err != nil {
		return err
	}
	if err := st.open(); err != nil {
		return err
	}
	ops := []struct {
		name   string
		weight int
		fn     func() error
	}{
		{"open", 2, st.open},
		{"close", 1, st.close},
		{"mmap", 2, st.mmap},
		{"create", 12, st.create},
		{"destroy", 6, st.destroy},
		{"inline", 14, st.inline},
		{"copy", 8, st.copy},
		{"old-api", 4, st.oldAPI},
		{"bind", 1, st.bind},
		{"fuzz", 3, st.fuzz},
		{"checked", 3, st.checked},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	deadline := time.Now().Add(dur)
	for n := 0; time.Now().Before(deadline); n++ {
		pick := st.r.IntN(total)
		for _, o := range ops {
			if pick -= o.weight; pick < 0 {
				st.ops[o.name]++
				if err := o.fn(); err != nil {
					return fmt.Errorf("rank %d (seed %d), op %d %s: %w", st.p.Rank, st.seed, n, o.name, err)
				}
				break
			}
		}
		if n%64 == 0 {
			st.publish()
		}
	}
	for len(st.devs) > 0 {
		if err := st.closeDev(0); err != nil {
			return err
		}
	}
	fmt.Printf("rank %d uid %d seed %d: ops %s; errnos %s\n", st.p.Rank, os.Geteuid(), st.seed, summary(st.ops), summary(st.errnos))
	return nil
}

// check accepts success and the documented errnos.
func (st *stressor) check(what string, err error) error {
	if err == nil {
		st.errnos["ok"]++
		return nil
	}
	var errno unix.Errno
	if !errors.As(err, &errno) || !documented[errno] {
		return fmt.Errorf("%s: undocumented error %v", what, err)
	}
	st.errnos[unix.ErrnoName(errno)]++
	return nil
}

// dev picks an open descriptor; there is always one until the end.
func (st *stressor) dev() *stressDev {
	return st.devs[st.r.IntN(len(st.devs))]
}

func (st *stressor) open() error {
	if len(st.devs) >= 3 {
		return nil
	}
	d, err := Open()
	if err != nil {
		return err
	}
	st.devs = append(st.devs, &stressDev{d: d})
	return nil
}

func (st *stressor) close() error {
	if len(st.devs) < 2 {
		return nil
	}
	return st.closeDev(st.r.IntN(len(st.devs)))
}

// closeDev closes a descriptor, in either order with its status array: the
// driver must cope with copies still in flight.
func (st *stressor) closeDev(i int) error {
	sd := st.devs[i]
	st.devs = append(st.devs[:i], st.devs[i+1:]...)
	if sd.s != nil && st.r.IntN(2) == 0 {
		if err := sd.s.Unmap(); err != nil {
			return err
		}
		sd.s = nil
	}
	if err := sd.d.Close(); err != nil {
		return err
	}
	if sd.s != nil {
		return sd.s.Unmap()
	}
	return nil
}

func (st *stressor) mmap() error {
	sd := st.dev()
	s, err := sd.d.MapStatus(1 + st.r.IntN(3*4096))
	if sd.s != nil {
		if !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("second status mapping: %v, want EBUSY", err)
		}
		return nil
	}
	if err == nil {
		sd.s = s
	}
	return st.check("mmap", err)
}

// bufs picks 0-4 local buffers: mostly pieces of the pool, sometimes
// read-only or inaccessible memory.
func (st *stressor) bufs() [][]byte {
	n := st.r.IntN(5)
	out := make([][]byte, n)
	for i := range out {
		switch k := st.r.IntN(20); {
		case k == 0:
			out[i] = st.ro[st.r.IntN(len(st.ro)/2):][:st.r.IntN(len(st.ro)/2)]
		case k == 1:
			out[i] = st.none[:1+st.r.IntN(len(st.none))]
		case k == 2:
			out[i] = nil
		default:
			b := st.pool[st.r.IntN(len(st.pool))]
			off := st.r.IntN(len(b))
			out[i] = b[off : off+st.r.IntN(len(b)-off+1)]
		}
	}
	return out
}

func (st *stressor) flags() Flags {
	f := Flags(st.r.Uint32() & 0xff)
	if st.r.IntN(30) == 0 {
		f |= 1 << (8 + st.r.IntN(24)) // unknown: EINVAL
	}
	return f
}

func (st *stressor) offset() uint64 {
	switch st.r.IntN(6) {
	case 0:
		return st.r.Uint64()
	case 1:
		return ^uint64(0) - st.r.Uint64N(1<<20)
	case 2, 3:
		return 0
	}
	return st.r.Uint64N(512 << 10)
}

func (st *stressor) length() uint64 {
	switch st.r.IntN(4) {
	case 0, 1:
		return All
	case 2:
		return st.r.Uint64()
	}
	return st.r.Uint64N(512 << 10)
}

// slot picks a status slot, inside the array or not, never slot 0: that
// one belongs to the checked copies, whose outcome must be their own.
func (st *stressor) slot(sd *stressDev) Slot {
	if sd.s != nil && st.r.IntN(8) != 0 {
		return Slot(1 + st.r.IntN(sd.s.Len()-1))
	}
	return Slot(st.r.Uint32() | 1)
}

// cookie picks one of this descriptor's, another descriptor's, another
// process's (maybe of another uid), or a made-up one.
func (st *stressor) cookie(sd *stressDev) Cookie {
	switch k := st.r.IntN(10); {
	case k < 3 && len(sd.cookies) > 0:
		return sd.cookies[st.r.IntN(len(sd.cookies))]
	case k < 5:
		other := st.devs[st.r.IntN(len(st.devs))]
		if len(other.cookies) > 0 {
			return other.cookies[st.r.IntN(len(other.cookies))]
		}
	case k < 9:
		v, ok := st.b.peek(fmt.Sprintf("stress.%d.%d", st.r.IntN(st.p.Size), st.r.IntN(8)))
		if ok {
			return Cookie(v)
		}
	}
	return Cookie(st.r.Uint64())
}

// publish posts a few of this process's cookies for the others.
func (st *stressor) publish() {
	if len(st.devs) == 0 {
		return
	}
	for k := range 8 {
		sd := st.devs[st.r.IntN(len(st.devs))]
		if len(sd.cookies) > 0 {
			st.b.put(fmt.Sprintf("stress.%d.%d", st.p.Rank, k), uint64(sd.cookies[st.r.IntN(len(sd.cookies))]))
		}
	}
}

func (st *stressor) create() error {
	sd := st.dev()
	prot := Protection(st.r.IntN(4))
	if st.r.IntN(30) == 0 {
		prot = Protection(st.r.Uint32())
	}
	// createRegion, not CreateRegion: a flag word that happens to hold
	// FlagInvalidateStatus watches the slot given, which CreateRegion
	// would leave at 0, the checked copies' slot; the watch may write
	// StatusFailed there at any time.
	c, err := sd.d.createRegion(st.bufs(), prot, st.flags(), st.slot(sd))
	if err == nil {
		if c == 0 {
			return errors.New("CREATE_REGION returned cookie 0")
		}
		sd.cookies = append(sd.cookies, c)
		if len(sd.cookies) > 32 {
			sd.cookies = sd.cookies[1:] // forgotten: freed at close
		}
	}
	return st.check("create", err)
}

func (st *stressor) destroy() error {
	sd := st.dev()
	return st.check("destroy", sd.d.DestroyRegion(st.cookie(sd)))
}

func (st *stressor) inline() error {
	sd := st.dev()
	dir := Direction(st.r.IntN(2))
	if st.r.IntN(40) == 0 {
		dir = Direction(2 + st.r.IntN(10))
	}
	_, err := sd.d.InlineCopy(dir, st.bufs(), st.cookie(sd), st.offset(), st.length(), st.flags(), st.slot(sd))
	return st.check("inline copy", err)
}

func (st *stressor) copy() error {
	sd := st.dev()
	_, err := sd.d.Copy(st.cookie(sd), st.offset(), st.cookie(sd), st.offset(), st.length(), st.flags(), st.slot(sd))
	return st.check("copy", err)
}

func (st *stressor) oldAPI() error {
	sd := st.dev()
	c, err := sd.d.InitSend(st.bufs(), st.flags())
	if err := st.check("init send", err); err != nil {
		return err
	}
	if err == nil {
		sd.cookies = append(sd.cookies, c)
	} else {
		c = st.cookie(sd)
	}
	if st.r.IntN(2) == 0 {
		_, err = sd.d.SyncRecv(st.bufs(), c, st.flags())
		return st.check("sync recv", err)
	}
	return st.check("init async recv", sd.d.InitAsyncRecv(st.bufs(), c, st.flags(), st.slot(sd)))
}

func (st *stressor) bind() error {
	sd := st.dev()
	var mask unix.CPUSet
	for i := range 4 {
		if st.r.IntN(2) == 0 {
			mask.Set(i)
		}
	}
	return st.check("bind", sd.d.BindOffload(BindFlags(st.r.IntN(9)), &mask))
}

// fuzz issues a random command number on random bytes. Every 8-byte word
// has its top bit set, so any field read as a user pointer is a kernel
// address and can never name this process's memory.
func (st *stressor) fuzz() error {
	sd := st.dev()
	var arg [8]uint64
	for i := range arg {
		arg[i] = st.r.Uint64() | 1<<63
	}
	cmd := uintptr(st.r.IntN(4))<<30 | uintptr(st.r.IntN(64))<<16 | 'K'<<8 | uintptr(st.r.IntN(0x40))
	if st.r.IntN(4) == 0 { // a real command on garbage
		cmds := []uintptr{uapi.CmdGetInfo, uapi.CmdBindOffload, uapi.CmdInitSend, uapi.CmdCreateRegion,
			uapi.CmdDestroyRegion, uapi.CmdInitAsyncRecv, uapi.CmdSyncRecv, uapi.CmdCopy,
			uapi.CmdInlineCopy, uapi.CmdCopyBounded, uapi.CmdInlineCopyBounded}
		cmd = cmds[st.r.IntN(len(cmds))]
	}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(sd.d.fd), cmd, uintptr(unsafe.Pointer(&arg[0])))
	if errno == 0 {
		return nil
	}
	return st.check(fmt.Sprintf("ioctl %#x", cmd), errno)
}

// checked copies known data amid the noise and verifies it.
func (st *stressor) checked() error {
	sd := st.dev()
	n := 1 + st.r.IntN(300<<10)
	src := payload(st.r.Uint64(), n)
	dst := make([]byte, n)
	c, err := sd.d.CreateRegion(split(src, st.r.IntN(n)), ProtRead, FlagSingleUse)
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOMEM) {
		return st.check("checked region at a limit", err)
	}
	if err != nil {
		return fmt.Errorf("checked region: %w", err)
	}
	flags := []Flags{0, FlagPinLocal, FlagDMA, FlagMemcpyThread, FlagDMA | FlagAsyncDMAComplete}[st.r.IntN(5)]
	if sd.s == nil {
		flags &^= FlagMemcpyThread | FlagAsyncDMAComplete
	} else {
		sd.s.Reset(0)
	}
	status, err := sd.d.InlineCopy(Read, split(dst, st.r.IntN(n)), c, 0, All, flags, 0)
	if flags != 0 && errors.Is(err, unix.ENOMEM) {
		// Every flag but none pins the local buffer, charged to the
		// caller's RLIMIT_MEMLOCK (the process of another uid has no
		// CAP_IPC_LOCK), where the noise's regions may have used it up.
		return st.check("checked copy pinning at the memlock limit", err)
	}
	if err != nil {
		return fmt.Errorf("checked copy (flags %#x): %w", flags, err)
	}
	if status == StatusPending {
		if status, err = sd.s.Wait(0, time.Minute); err != nil {
			return err
		}
	}
	if status != StatusSuccess {
		return fmt.Errorf("checked copy (flags %#x) of %d bytes: status %v; driver: %s", flags, n, status, dmaCounters())
	}
	if checksum(dst) != checksum(src) {
		return fmt.Errorf("checked copy (flags %#x) of %d bytes: checksum %#x, want %#x", flags, n, checksum(dst), checksum(src))
	}
	return nil
}

// summary prints a count map in a stable order.
func summary(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return b.String()
}

// dmaCounters are the driver's statistics that tell why a copy failed, on
// one line.
func dmaCounters() string {
	text, err := Stats()
	if err != nil {
		return err.Error()
	}
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "dma") || strings.Contains(l, "failed") {
			keep = append(keep, strings.TrimSpace(l))
		}
	}
	return strings.Join(keep, "; ")
}
