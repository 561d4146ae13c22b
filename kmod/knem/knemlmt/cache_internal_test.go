package knemlmt

import (
	"errors"
	"fmt"
	"hash/crc64"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

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

// cacheStep is one message of TestRegistrationCache: which buffer, its
// seed, and what the sender expects of the driver's counters since the
// start (regions created, kernel copies) once the message is through.
type cacheStep struct {
	what     string
	off      int // where in the sender's mapping the buffer starts
	seed     int
	remap    bool // munmap and mmap the buffer again first
	dontneed bool // MADV_DONTNEED it first
	creates  int64
	kcopies  int64
	// recvCalls is the receiver's system calls for the message: 1 for the
	// driver's copy, 2 to attach (ATTACH_REGION, mmap), 0 from the mapping.
	recvCalls int
}

const cacheMsg = 64<<10 + 5

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
	d, err := knem.Open()
	if errors.Is(err, knem.ErrNoDevice) && os.Getenv("KNEMESIS_KCI") != "1" {
		t.Skip("needs the knem module (/dev/knem absent): make test-kernel runs these tests in QEMU guests")
	}
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
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
	send := func(buf []byte) error {
		tr, n, err := eng.StartSend(1, [][]byte{buf}, Name, rts)
		if err != nil {
			return err
		}
		if err := ch.SendRTS(1, rts[:n]); err != nil {
			return err
		}
		return ch.Wait(tr)
	}
	for _, s := range steps {
		buf := mem[s.off : s.off+cacheMsg]
		switch {
		case s.remap:
			if err := remapFixed(buf); err != nil {
				return err
			}
		case s.dontneed:
			if err := unix.Madvise(mem[s.off+8192:s.off+12288], unix.MADV_DONTNEED); err != nil {
				return err
			}
		}
		fillSeed(buf, s.seed)
		if err := send(buf); err != nil {
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
			if err := send(mem[off : off+4096+i]); err != nil {
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
		calls, err := recv(cacheMsg, s.seed)
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
