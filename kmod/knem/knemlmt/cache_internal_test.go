package knemlmt

import (
	"fmt"
	"hash/crc64"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/knemtest"
	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/kmod/knem/internal/pins"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// driverStats reads the driver's global counters named.
func driverStats(names ...string) (map[string]int64, error) {
	text, err := knem.Stats()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		for _, n := range names {
			if k == n {
				out[n], _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("driver statistics lack %q:\n%s", n, text)
		}
	}
	return out, nil
}

var cacheStats = []string{"regions created", "regions destroyed", "copies cpu", "copies kthread", "copies dma"}

func fillSeed(b []byte, seed int) {
	for i := range b {
		b[i] = byte(i*7 + seed*13 + i>>11)
	}
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// cacheStep is one message of TestRegistrationCache: which buffers, its
// seed, and what the sender expects of the driver's counters since the
// start (regions created, kernel copies) once the message is through.
type cacheStep struct {
	what string
	off  int     // where in the sender's mapping the buffer starts
	iov  []piece // the buffers instead, when more than one
	seed int
	// First munmap and mmap again, or MADV_DONTNEED the first whole
	// page of, buffer touch.
	remap, dontneed bool
	touch           int
	creates         int64
	kcopies         int64
	// recvCalls is the receiver's system calls for the message: 1 for the
	// driver's copy, 2 to attach (ATTACH_REGION, mmap), 0 from the mapping.
	recvCalls int
}

// piece is one buffer of a message: where in the sender's mapping, and
// how long.
type piece struct{ off, n int }

const cacheMsg = 64<<10 + 5

// pieces are s's buffers.
func (s cacheStep) pieces() []piece {
	if s.iov != nil {
		return s.iov
	}
	return []piece{{s.off, cacheMsg}}
}

func (s cacheStep) len() int {
	n := 0
	for _, p := range s.pieces() {
		n += p.n
	}
	return n
}

var cacheSteps = []cacheStep{
	{what: "first send", seed: 1, creates: 1, kcopies: 1, recvCalls: 1},
	{what: "second send attaches", seed: 2, creates: 1, kcopies: 1, recvCalls: 2},
	{what: "third send from the mapping", seed: 3, creates: 1, kcopies: 1, recvCalls: 0},
	{what: "fourth send from the mapping", seed: 4, creates: 1, kcopies: 1, recvCalls: 0},
	{what: "after munmap and mmap", seed: 5, remap: true, creates: 2, kcopies: 2, recvCalls: 1},
	{what: "after MADV_DONTNEED", seed: 6, dontneed: true, creates: 3, kcopies: 3, recvCalls: 1},
	{what: "another buffer", off: 1 << 20, seed: 7, creates: 4, kcopies: 4, recvCalls: 1},
	{what: "back to the first", seed: 8, creates: 4, kcopies: 4, recvCalls: 2},
}

// TestRegistrationCache: repeated sends from one buffer reuse the sender's
// region (one region created) and, from the third on, the receiver copies
// from its attachment (no system call, no kernel copy); a buffer mapped
// again, or zapped with MADV_DONTNEED, between sends gets a new region and
// the receiver gets the new bytes (checksums); the sender caches at most
// regionCacheLen regions and the receiver maps at most attachCacheLen.
func TestRegistrationCache(t *testing.T) {
	runCache(t, Policy{AsyncMin: 1 << 62, DMA: func(int) bool { return false }}, cacheSteps, true)
}

// Lists of buffers: linear joins page to page (the receiver can map its
// region), grown differs from it by its last length, nonLinear does not
// join.
var (
	linear    = []piece{{100, 16<<10 - 100}, {64 << 10, 32 << 10}, {256 << 10, 5000}}
	withEmpty = []piece{{100, 16<<10 - 100}, {512 << 10, 0}, {64 << 10, 32 << 10}, {256 << 10, 5000}}
	grown     = []piece{{100, 16<<10 - 100}, {64 << 10, 32 << 10}, {256 << 10, 6000}}
	nonLinear = []piece{{1<<20 + 100, 3000}, {1<<20 + 8192 + 7, 3000}}
)

var iovecSteps = []cacheStep{
	{what: "first send of a list", iov: linear, seed: 1, creates: 1, kcopies: 1, recvCalls: 1},
	{what: "second send of the list attaches", iov: linear, seed: 2, creates: 1, kcopies: 1, recvCalls: 2},
	{what: "third send of the list from the mapping", iov: linear, seed: 3, creates: 1, kcopies: 1, recvCalls: 0},
	{what: "the list with an empty buffer between", iov: withEmpty, seed: 4, creates: 1, kcopies: 1, recvCalls: 0},
	{what: "one length changed", iov: grown, seed: 5, creates: 2, kcopies: 2, recvCalls: 1},
	{what: "back to the list", iov: linear, seed: 6, creates: 2, kcopies: 2, recvCalls: 0},
	{what: "after munmap and mmap of the middle buffer", iov: linear, seed: 7, remap: true, touch: 1, creates: 3, kcopies: 3, recvCalls: 1},
	{what: "after MADV_DONTNEED in the last buffer", iov: linear, seed: 8, dontneed: true, touch: 2, creates: 4, kcopies: 4, recvCalls: 1},
	{what: "the list again attaches", iov: linear, seed: 9, creates: 4, kcopies: 4, recvCalls: 2},
	{what: "first send of a list that does not join", iov: nonLinear, seed: 10, creates: 5, kcopies: 5, recvCalls: 1},
	// ATTACH_REGION refused (EINVAL), then the driver's copy.
	{what: "second send of the list that does not join", iov: nonLinear, seed: 11, creates: 5, kcopies: 6, recvCalls: 2},
	{what: "third send of the list that does not join", iov: nonLinear, seed: 12, creates: 5, kcopies: 7, recvCalls: 1},
}

// TestRegistrationCacheIovec: repeated sends of one list of buffers reuse
// the sender's region, as one buffer does, and an empty buffer in the list
// changes nothing; a list that differs by one length, or one of whose
// buffers was mapped again or zapped, gets a new region, and the receiver
// the new bytes (checksums). The receiver maps a region whose buffers join
// page to page; one whose buffers do not is refused once and then copied
// by the driver, without asking again.
func TestRegistrationCacheIovec(t *testing.T) {
	runCache(t, Policy{AsyncMin: 1 << 62, DMA: func(int) bool { return false }}, iovecSteps, false)
}

// TestRegistrationCacheOff: with Policy.NoCache every message gets its own
// single-use region and a driver copy, as before the cache.
func TestRegistrationCacheOff(t *testing.T) {
	steps := []cacheStep{
		{what: "first send", seed: 1, creates: 1, kcopies: 1, recvCalls: 1},
		{what: "second send", seed: 2, creates: 2, kcopies: 2, recvCalls: 1},
		{what: "third send", seed: 3, creates: 3, kcopies: 3, recvCalls: 1},
	}
	runCache(t, Policy{AsyncMin: 1 << 62, DMA: func(int) bool { return false }, NoCache: true}, steps, false)
}

// runCache sends steps from rank 0 to rank 1 under policy p, then, with
// bound, more buffers than the caches hold; no page stays pinned after.
func runCache(t *testing.T, p Policy, steps []cacheStep, bound bool) {
	knemtest.Open(t)
	SetPolicy(p)
	defer SetPolicy(Policy{})
	job := lmttest.NewJob(2)
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Timeout: 2 * time.Minute}, func(p launch.Proc) error {
		ch, eng, err := lmttest.Open(p, Name, nil)
		if err != nil {
			return err
		}
		defer eng.Close()
		if p.Rank == 0 {
			return cacheSender(ch, eng, steps, bound)
		}
		return cacheReceiver(ch, eng, steps, bound)
	})
	if _, child := launch.Self(); !child && os.Geteuid() == 0 {
		if err := pins.WaitZero(30 * time.Second); err != nil {
			t.Fatalf("after both processes ended: %v", err)
		}
	}
}

func cacheSender(ch *lmttest.Channel, eng *lmt.Engine, steps []cacheStep, bound bool) error {
	const span = 2 << 20
	mem, err := unix.Mmap(-1, 0, span, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer func() { unix.Munmap(mem) }()
	start, err := driverStats(cacheStats...)
	if err != nil {
		return err
	}
	rts := make([]byte, 4096)
	send := func(bufs [][]byte) error {
		tr, n, err := eng.StartSend(1, bufs, Name, rts)
		if err != nil {
			return err
		}
		if err := ch.SendRTS(1, rts[:n]); err != nil {
			return err
		}
		return ch.Wait(tr)
	}
	for _, s := range steps {
		pcs := s.pieces()
		bufs := make([][]byte, len(pcs))
		for i, p := range pcs {
			bufs[i] = mem[p.off : p.off+p.n]
		}
		switch touched := pcs[s.touch]; {
		case s.remap:
			if err := remapFixed(bufs[s.touch]); err != nil {
				return err
			}
		case s.dontneed:
			page := (touched.off + 4095) &^ 4095
			if page+4096 > touched.off+touched.n {
				return fmt.Errorf("%s: buffer %d holds no whole page", s.what, s.touch)
			}
			if err := unix.Madvise(mem[page:page+4096], unix.MADV_DONTNEED); err != nil {
				return err
			}
		}
		// The message's bytes are the seed's, whatever the buffers.
		msg := make([]byte, s.len())
		fillSeed(msg, s.seed)
		for rest, b := msg, bufs; len(b) > 0; b = b[1:] {
			rest = rest[copy(b[0], rest):]
		}
		if err := send(bufs); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		now, err := driverStats(cacheStats...)
		if err != nil {
			return err
		}
		created := now["regions created"] - start["regions created"]
		kcopies := now["copies cpu"] + now["copies kthread"] + now["copies dma"] -
			start["copies cpu"] - start["copies kthread"] - start["copies dma"]
		if created != s.creates || kcopies != s.kcopies {
			return fmt.Errorf("%s: %d regions created and %d kernel copies since the start, want %d and %d",
				s.what, created, kcopies, s.creates, s.kcopies)
		}
	}
	if !bound {
		return nil
	}
	// Bound: more buffers than the caches hold, each sent twice (the
	// receiver attaches at the second).
	for i := 0; i < boundBuffers; i++ {
		off := 4096 * (i + 1)
		fillSeed(mem[off:off+4096+i], i)
		for range 2 {
			if err := send([][]byte{mem[off : off+4096+i]}); err != nil {
				return fmt.Errorf("bound, buffer %d: %w", i, err)
			}
		}
	}
	now, err := driverStats(cacheStats...)
	if err != nil {
		return err
	}
	live := now["regions created"] - now["regions destroyed"] - (start["regions created"] - start["regions destroyed"])
	if live != regionCacheLen {
		return fmt.Errorf("%d regions live after %d buffers, want the cache's %d", live, boundBuffers+2, regionCacheLen)
	}
	return nil
}

// remapFixed unmaps buf's pages and maps fresh ones at the same address.
func remapFixed(buf []byte) error {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	base, end := p&^4095, (p+uintptr(len(buf))+4095)&^4095
	if _, _, e := unix.Syscall(unix.SYS_MUNMAP, base, end-base, 0); e != 0 {
		return e
	}
	got, _, e := unix.Syscall6(unix.SYS_MMAP, base, end-base, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_FIXED, ^uintptr(0), 0)
	if e != 0 || got != base {
		return fmt.Errorf("mmap again at %#x: %#x, %v", base, got, e)
	}
	return nil
}

func cacheReceiver(ch *lmttest.Channel, eng *lmt.Engine, steps []cacheStep, bound bool) error {
	recv := func(n int, seed int) (calls int, err error) {
		r, err := ch.NextRTS(0)
		if err != nil {
			return 0, err
		}
		buf := make([]byte, n)
		tr, err := eng.StartRecv(0, r, [][]byte{buf})
		if err != nil {
			return 0, err
		}
		if err := ch.Wait(tr); err != nil {
			return 0, err
		}
		want := make([]byte, n)
		fillSeed(want, seed)
		if got, w := crc64.Checksum(buf, crcTable), crc64.Checksum(want, crcTable); got != w {
			return 0, fmt.Errorf("checksum %#x, want %#x", got, w)
		}
		return tr.Stats().Syscalls, nil
	}
	for _, s := range steps {
		calls, err := recv(s.len(), s.seed)
		if err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		if calls != s.recvCalls {
			return fmt.Errorf("%s: %d system calls, want %d", s.what, calls, s.recvCalls)
		}
	}
	if !bound {
		return nil
	}
	for i := 0; i < boundBuffers; i++ {
		for range 2 {
			if _, err := recv(4096+i, i); err != nil {
				return fmt.Errorf("bound, buffer %d: %w", i, err)
			}
		}
	}
	if n, err := attachMappings(); err != nil || n != attachCacheLen {
		return fmt.Errorf("%d attachments mapped (%v) after %d buffers, want the cache's %d",
			n, err, boundBuffers+2, attachCacheLen)
	}
	return nil
}

const boundBuffers = regionCacheLen + 8

// attachMappings counts this process's mappings of the device at a
// non-zero offset: attachments (offset 0 is the status array).
func attachMappings() (int, error) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[5] == knem.DevicePath && strings.Trim(f[2], "0") != "" {
			n++
		}
	}
	return n, nil
}

// TestCacheKey: a cached region is found again for the same list of
// buffers, empty buffers aside, and for no other (another length, base,
// order or count), without allocating; its page count is the driver's.
func TestCacheKey(t *testing.T) {
	mem := make([]byte, 64<<10)
	list := [][]byte{mem[100:4096], mem[8192:16384], mem[20000:20005]}
	var e cachedRegion
	e.record(keyOf(list), list)
	e.cookie = 1
	if e.pages != 1+2+1 {
		t.Errorf("%d pages for the list, want 4", e.pages)
	}
	for _, c := range []struct {
		what string
		bufs [][]byte
		want bool
	}{
		{"the same list", [][]byte{mem[100:4096], mem[8192:16384], mem[20000:20005]}, true},
		{"with empty buffers", [][]byte{mem[0:0], mem[100:4096], mem[9:9], mem[8192:16384], mem[20000:20005], nil}, true},
		{"a length changed", [][]byte{mem[100:4096], mem[8192:16384], mem[20000:20006]}, false},
		{"a base changed", [][]byte{mem[100:4096], mem[8192:16384], mem[20001:20006]}, false},
		{"two swapped", [][]byte{mem[8192:16384], mem[100:4096], mem[20000:20005]}, false},
		{"one buffer less", [][]byte{mem[100:4096], mem[8192:16384]}, false},
		{"one buffer more", [][]byte{mem[100:4096], mem[8192:16384], mem[20000:20005], mem[30000:30001]}, false},
		{"one buffer", [][]byte{mem[100:20005]}, false},
	} {
		if got := e.holds(keyOf(c.bufs), c.bufs); got != c.want {
			t.Errorf("%s: found %v, want %v", c.what, got, c.want)
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { e.holds(keyOf(list), list) }); allocs != 0 {
		t.Errorf("a lookup allocates %v times", allocs)
	}
	// Refilled with a shorter list, the entry keeps its array.
	before := unsafe.SliceData(e.spans)
	e.record(keyOf(list[:1]), list[:1])
	if unsafe.SliceData(e.spans) != before || len(e.spans) != 1 || e.pages != 1 {
		t.Errorf("refilled: %d spans of %d pages, array moved %v", len(e.spans), e.pages, unsafe.SliceData(e.spans) != before)
	}
}
