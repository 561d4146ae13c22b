package knemlmt

import (
	"errors"
	"fmt"
	"hash/crc64"
	"os"
	"runtime"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/knemtest"
	"github.com/knemesis/knemesis/internal/vmpin"
	"github.com/knemesis/knemesis/kmod/knem"
)

// These tests make the driver refuse a cached region, as a job's own
// pinned memory would (RLIMIT_MEMLOCK, max_user_regions), and check that
// the sender's cache makes room by evicting idle entries, least recently
// used first, and declares the region on its retry. They need /dev/knem
// and root (to lower the module parameter, and to give up CAP_IPC_LOCK on
// one thread): the QEMU guests of make test-kernel have both.

// limitsSetup opens the sender's and the receiver's descriptors and the
// sender's cache, closed at the end of the test.
func limitsSetup(t *testing.T) (c *regionCache, rcv *knem.Device) {
	t.Helper()
	snd := knemtest.Open(t)
	if os.Geteuid() != 0 {
		t.Skip("lacks root: lowers a knem module parameter or gives up CAP_IPC_LOCK (the QEMU guests run as root)")
	}
	rcv = knemtest.Open(t)
	status, err := snd.MapStatus(regionCacheLen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { status.Unmap() })
	c = &regionCache{dev: snd, status: status}
	t.Cleanup(c.close)
	return c, rcv
}

// inflight is a transfer still sending its region, until done.
type inflight struct{ done bool }

func (f *inflight) ID() uint64 { return 1 }
func (f *inflight) Done() bool { return f.done }
func (f *inflight) Err() error { return nil }

// buffers maps the named buffers, of the given pages each, one unmapped
// page apart (no two share a page), and fills them with their seeds.
func buffers(t *testing.T, pages ...int) [][]byte {
	total := 0
	for _, p := range pages {
		total += p + 1
	}
	mem, err := unix.Mmap(-1, 0, total*int(pageSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	bufs := make([][]byte, len(pages))
	off := 0
	for i, p := range pages {
		bufs[i] = mem[off : off+p*int(pageSize)]
		fillSeed(bufs[i], i+1)
		off += (p + 1) * int(pageSize)
	}
	return bufs
}

// copied reads region c through rcv, as the receiver's driver copy does,
// and compares the checksum with src's.
func copied(rcv *knem.Device, c knem.Cookie, src []byte) error {
	dst := make([]byte, len(src))
	st, err := rcv.InlineCopy(knem.Read, [][]byte{dst}, c, 0, knem.All, 0, 0)
	if err != nil || st != knem.StatusSuccess {
		return fmt.Errorf("copy from %v: status %v, %v", c, st, err)
	}
	if got, want := crc64.Checksum(dst, crcTable), crc64.Checksum(src, crcTable); got != want {
		return fmt.Errorf("copy from %v: checksum %#x, want %#x", c, got, want)
	}
	return nil
}

// cacheState checks the cache's counters and which buffers it holds.
func cacheState(c *regionCache, creates, evictions int, held ...[]byte) error {
	if c.creates != creates || c.evictions != evictions {
		return fmt.Errorf("%d regions declared and %d evicted, want %d and %d",
			c.creates, c.evictions, creates, evictions)
	}
	if c.len() != len(held) {
		return fmt.Errorf("the cache holds %d regions, want %d", c.len(), len(held))
	}
	for i, b := range held {
		bufs := [][]byte{b}
		found := false
		for j := range c.ents {
			found = found || c.ents[j].holds(keyOf(bufs), bufs)
		}
		if !found {
			return fmt.Errorf("held buffer %d (%d bytes) is not in the cache", i, len(b))
		}
	}
	return nil
}

// TestRegistrationCacheMemlock: under an RLIMIT_MEMLOCK that holds three
// 16-page regions, a fourth buffer makes the cache evict the least
// recently used idle region (not the busy, older one) and declare the
// new one on the retry; a 32-page buffer evicts two; a buffer larger than
// the limit empties the idle entries, is refused, and the single-use
// region that Handle falls back to is refused with ENOMEM. Every region
// the cache returned copies the right bytes (checksums), and the pages
// the cache pinned are unpinned and uncharged once it closes.
func TestRegistrationCacheMemlock(t *testing.T) {
	c, rcv := limitsSetup(t)
	// Root's CAP_IPC_LOCK would exempt it from RLIMIT_MEMLOCK: this
	// test's thread alone gives it up. Never unlocked, the thread ends
	// with the test; the rest of the process keeps the capability.
	runtime.LockOSThread()
	if err := dropIPCLock(); err != nil {
		t.Fatal(err)
	}
	bs := buffers(t, 16, 16, 16, 16, 32, 64)
	a, b, cc, d, e, f := bs[0], bs[1], bs[2], bs[3], bs[4], bs[5]
	start, err := driverStats("pinned pages")
	if err != nil {
		t.Fatal(err)
	}
	base := vmPin(t)
	setMemlock(t, (base+48)*uint64(pageSize))

	busy := &inflight{}
	ca, okA := c.get(busy, [][]byte{a})
	cb, okB := c.get(sent{}, [][]byte{b})
	_, okC := c.get(sent{}, [][]byte{cc})
	if !okA || !okB || !okC {
		t.Fatalf("three buffers under the limit: cached %v %v %v", okA, okB, okC)
	}
	if err := cacheState(c, 3, 0, a, b, cc); err != nil {
		t.Fatal("three buffers: ", err)
	}
	if got := vmPin(t); got != base+48 {
		t.Fatalf("three buffers: %d pages pinned, want %d", got, base+48)
	}

	cd, ok := c.get(sent{}, [][]byte{d})
	if !ok || cd == cb {
		t.Fatalf("a fourth buffer over the limit: cookie %v, cached %v", cd, ok)
	}
	if err := cacheState(c, 4, 1, a, cc, d); err != nil {
		t.Fatal("a fourth buffer: ", err)
	}
	for _, r := range []struct {
		c   knem.Cookie
		src []byte
	}{{cd, d}, {ca, a}} {
		if err := copied(rcv, r.c, r.src); err != nil {
			t.Fatal("a fourth buffer: ", err)
		}
	}

	ce, ok := c.get(sent{}, [][]byte{e})
	if !ok {
		t.Fatal("a 32-page buffer: not cached")
	}
	if err := cacheState(c, 5, 3, a, e); err != nil {
		t.Fatal("a 32-page buffer: ", err)
	}
	if err := copied(rcv, ce, e); err != nil {
		t.Fatal("a 32-page buffer: ", err)
	}
	if got := vmPin(t); got != base+48 {
		t.Fatalf("a 32-page buffer: %d pages pinned, want %d", got, base+48)
	}

	busy.done = true
	if again, ok := c.get(sent{}, [][]byte{a}); !ok || again != ca {
		t.Fatalf("the first buffer again: cookie %v (cached %v), want %v", again, ok, ca)
	}
	if got, ok := c.get(sent{}, [][]byte{f}); ok {
		t.Fatalf("a buffer over the limit by itself: cached as %v", got)
	}
	if err := cacheState(c, 5, 5); err != nil {
		t.Fatal("a buffer over the limit by itself: ", err)
	}
	if _, err := c.dev.CreateRegion([][]byte{f}, knem.ProtRead, knem.FlagSingleUse); !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("a single-use region over the limit: %v, want ENOMEM", err)
	}

	c.close()
	if got := vmPin(t); got != base {
		t.Fatalf("after the cache closed: %d pages charged, want %d", got, base)
	}
	end, err := driverStats("pinned pages")
	if err != nil {
		t.Fatal(err)
	}
	if end["pinned pages"] != start["pinned pages"] {
		t.Fatalf("after the cache closed: the driver pins %d pages, %d before the test",
			end["pinned pages"], start["pinned pages"])
	}
}

// TestRegistrationCacheUserRegions: with max_user_regions two above the
// regions alive, a third buffer makes the cache evict one idle region
// (ENOSPC) and declare the new one on the retry.
func TestRegistrationCacheUserRegions(t *testing.T) {
	c, rcv := limitsSetup(t)
	bufs := buffers(t, 4, 4, 4)
	now, err := driverStats("regions created", "regions destroyed")
	if err != nil {
		t.Fatal(err)
	}
	live := now["regions created"] - now["regions destroyed"]
	setModuleParam(t, "max_user_regions", strconv.FormatInt(live+2, 10))

	for _, b := range bufs[:2] {
		if _, ok := c.get(sent{}, [][]byte{b}); !ok {
			t.Fatal("two buffers under the limit: not cached")
		}
	}
	cz, ok := c.get(sent{}, [][]byte{bufs[2]})
	if !ok {
		t.Fatal("a third buffer at the limit: not cached")
	}
	if err := cacheState(c, 3, 1, bufs[1], bufs[2]); err != nil {
		t.Fatal("a third buffer at the limit: ", err)
	}
	if err := copied(rcv, cz, bufs[2]); err != nil {
		t.Fatal("a third buffer at the limit: ", err)
	}
	if _, err := c.dev.CreateRegion(bufs[:1], knem.ProtRead, knem.FlagSingleUse); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("a fourth region at the limit: %v, want ENOSPC", err)
	}
}

// dropIPCLock removes CAP_IPC_LOCK from the calling thread's effective
// set (capabilities are per thread).
func dropIPCLock() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[unix.CAP_IPC_LOCK/32].Effective &^= 1 << (unix.CAP_IPC_LOCK % 32)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset without CAP_IPC_LOCK: %w", err)
	}
	return nil
}

// vmPin is this process's pinned_vm in pages (VmPin), what the driver
// charges against RLIMIT_MEMLOCK.
func vmPin(t *testing.T) uint64 {
	t.Helper()
	n, err := vmpin.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return n / uint64(pageSize)
}

// setMemlock lowers RLIMIT_MEMLOCK (per process) to n bytes until the
// test ends.
func setMemlock(t *testing.T, n uint64) {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: n, Max: old.Max}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old) })
}

// setModuleParam sets a knem module parameter until the test ends.
func setModuleParam(t *testing.T, name, value string) {
	t.Helper()
	p := "/sys/module/knem/parameters/" + name
	old, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(value), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(p, old, 0); err != nil {
			t.Errorf("restoring %s: %v", p, err)
		}
	})
}
