package knem

// Helpers of the tests that drive the real driver. They run inside the QEMU
// guests of `make test-kernel` (ci/test-kernel.sh), where the harness loads
// knem and the soft DMA provider and sets KNEMESIS_KCI=1; anywhere without
// /dev/knem they skip.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc64"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/knemesis/knemesis/internal/await"
	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem/internal/pins"
)

const noDevice = "lacks knem-device: needs the knem module (/dev/knem absent): make test-kernel runs these tests in QEMU guests"

// inGuest is true in the CI guests, where every capability the tests need
// is there by construction: nothing may skip.
var inGuest = os.Getenv("KNEMESIS_KCI") == "1"

// open opens the device or skips the test when there is none; the device
// is closed when the test ends.
func open(t testing.TB) *Device {
	t.Helper()
	d, err := Open()
	if errors.Is(err, ErrNoDevice) && !inGuest {
		t.Skip(noDevice)
	}
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// needDMA skips a DMA test on a machine without a DMA_MEMCPY channel, and
// fails it in the guests, where the soft provider is loaded.
func needDMA(t testing.TB, d *Device) {
	t.Helper()
	info, err := d.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Features&FeatureDMA == 0 {
		if inGuest {
			t.Fatal("GET_INFO reports no DMA feature although softdma is loaded")
		}
		t.Skip("lacks knem-dma: no DMA_MEMCPY channel on this machine (GET_INFO features lack DMA)")
	}
}

// mapStatus maps a status array of one page, unmapped when the test ends.
func mapStatus(t testing.TB, d *Device) *StatusArray {
	t.Helper()
	s, err := d.MapStatus(1)
	if err != nil {
		t.Fatalf("MapStatus: %v", err)
	}
	t.Cleanup(func() { s.Unmap() })
	return s
}

// region creates a region, destroyed when the test ends unless it is gone.
func region(t testing.TB, d *Device, bufs [][]byte, prot Protection, flags Flags) Cookie {
	t.Helper()
	c, err := d.CreateRegion(bufs, prot, flags)
	if err != nil {
		t.Fatalf("CreateRegion(prot %d, flags %#x): %v", prot, flags, err)
	}
	if c == 0 {
		t.Fatal("CreateRegion returned cookie 0")
	}
	t.Cleanup(func() { d.DestroyRegion(c) })
	return c
}

// mmapBytes maps n anonymous bytes with prot, unmapped when the test ends.
func mmapBytes(t testing.TB, n, prot int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, prot, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// faultingAddr is the address of a page no access can succeed at: a
// PROT_NONE page kept mapped until the test ends. A page unmapped instead
// could be mapped again by the Go runtime (heap growth, a thread's stack)
// before the driver reads it, and the driver would then parse whatever
// lies there: TestUnreadableArgumentsAreEFAULT failed so once in the 6.1
// guest, with EINVAL where EFAULT was due.
func faultingAddr(t testing.TB) uintptr {
	t.Helper()
	return uintptr(unsafe.Pointer(&mmapBytes(t, 4096, unix.PROT_NONE)[0]))
}

// faultingIovecs is an iovec array in a page no access can succeed at.
func faultingIovecs(t testing.TB) *uapi.ParamIovec {
	t.Helper()
	return (*uapi.ParamIovec)(unsafe.Pointer(&mmapBytes(t, 4096, unix.PROT_NONE)[0]))
}

// noAccess is n bytes of PROT_NONE memory: mapped, but neither readable
// nor writable, so the driver can neither pin nor copy it.
func noAccess(t testing.TB, n int) []byte {
	return mmapBytes(t, n, unix.PROT_NONE)
}

// ioctlRaw issues a command with an arbitrary argument.
func ioctlRaw(d *Device, cmd, arg uintptr) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), cmd, arg)
	if errno != 0 {
		return errno
	}
	return nil
}

func wantErrno(t testing.TB, what string, err error, want unix.Errno) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want %v (%s)", what, err, want, unix.ErrnoName(want))
	}
}

var crcTable = crc64.MakeTable(crc64.ECMA)

func checksum(b []byte) uint64 { return crc64.Checksum(b, crcTable) }

// payload is n reproducible pseudo-random bytes.
func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// split cuts b into pieces at the given cut points, so one message spans
// several iovecs with odd lengths and alignments.
func split(b []byte, cuts ...int) [][]byte {
	var out [][]byte
	prev := 0
	for _, c := range cuts {
		c = min(max(c, prev), len(b))
		out = append(out, b[prev:c])
		prev = c
	}
	return append(out, b[prev:])
}

const fill = 0xEE

// guarded is a destination buffer with fill bytes before and after it, so
// that a test sees any byte written past the bytes the driver may touch.
type guarded struct {
	all  []byte
	body []byte
}

func newGuarded(n int) guarded {
	const guard = 4096 + 13
	all := bytes.Repeat([]byte{fill}, n+2*guard)
	return guarded{all: all, body: all[guard : guard+n]}
}

// check asserts that body starts with want and that every other byte still
// holds the fill.
func (g guarded) check(t testing.TB, what string, want []byte) {
	t.Helper()
	start := int(uintptr(unsafe.Pointer(unsafe.SliceData(g.body))) - uintptr(unsafe.Pointer(&g.all[0])))
	if !bytes.Equal(g.body[:len(want)], want) {
		t.Errorf("%s: %d bytes copied with checksum %#x, want %#x (first difference at %d)",
			what, len(want), checksum(g.body[:len(want)]), checksum(want), firstDiff(g.body, want))
	}
	for i, c := range g.all {
		inCopy := i >= start && i < start+len(want)
		if !inCopy && c != fill {
			t.Errorf("%s: byte %d of the destination (%d from the copy's start) was written; exactly %d bytes should be",
				what, i, i-start, len(want))
			return
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// wait waits for an asynchronous copy's slot, failing the test when it
// does not complete in time or fails.
func wait(t testing.TB, s *StatusArray, slot Slot, st Status, what string) {
	t.Helper()
	if st == StatusPending {
		var err error
		if st, err = s.Wait(slot, 30*time.Second); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	if st != StatusSuccess {
		t.Fatalf("%s: status %v", what, st)
	}
}

// waitUnpinned waits until no page is pinned any more: asynchronous copies
// and exited processes release theirs shortly after.
func waitUnpinned(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() != 0 && inGuest {
		t.Fatal("the guest tests run as root, which the exact pin count needs")
	}
	if err := pins.WaitZero(20 * time.Second); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// board passes small values (cookies) between the processes of a job
// through files in a directory every rank can write, whatever its uid.
type board string

const envBoard = "KNEM_TEST_BOARD"

func newBoard(t testing.TB) board {
	if dir := os.Getenv(envBoard); dir != "" {
		return board(dir) // a rank: the parent made it
	}
	dir, err := os.MkdirTemp("", "knem-board-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return board(dir)
}

func (b board) put(key string, v uint64) error {
	tmp := filepath.Join(string(b), "."+key)
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(v, 10)), 0o666); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(string(b), key)); err != nil {
		return err
	}
	launchtest.Progress() // the job advances: its watchdog re-arms
	return nil
}

// boardStall is how long get waits with nothing added to the board: the
// jobs' launchtest Timeout, whose watchdog would stop them next.
const boardStall = jobStall

// get waits for key. The wait follows the job: every put by any rank is
// progress, so a rank slowed by a loaded machine is waited for however
// long the whole job takes; get fails only once nothing was added to the
// board for boardStall, naming the key and what the board held.
func (b board) get(key string) (uint64, error) { return b.getWithin(key, boardStall, nil) }

// getWithin is get, failing after stall with nothing added to the board;
// looked, when not nil, is called after each look that did not find key
// (a test's hook).
func (b board) getWithin(key string, stall time.Duration, looked func()) (uint64, error) {
	var v uint64
	var held []string
	err := await.Poll{Stall: stall, MinSleep: time.Millisecond, MaxSleep: 20 * time.Millisecond}.Until(context.Background(),
		func() (uint64, bool, error) {
			data, err := os.ReadFile(filepath.Join(string(b), key))
			if err == nil {
				v, err = strconv.ParseUint(string(data), 10, 64)
				return 0, true, err
			}
			entries, err := os.ReadDir(string(b))
			if err != nil {
				return 0, false, fmt.Errorf("waiting for %q on the board: %w", key, err)
			}
			held = held[:0]
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), ".") {
					held = append(held, e.Name())
				}
			}
			if looked != nil {
				looked()
			}
			return uint64(len(held)), false, nil
		})
	var se *await.StallError
	if errors.As(err, &se) {
		return 0, fmt.Errorf("no %q on the board: no rank added anything for %v (it holds %q): %w", key, se.Stall, held, err)
	}
	return v, err
}

// peek reads key if it is there, without waiting.
func (b board) peek(key string) (uint64, bool) {
	data, err := os.ReadFile(filepath.Join(string(b), key))
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(string(data), 10, 64)
	return v, err == nil
}

// barrier returns once all size ranks reached the barrier called name.
func (b board) barrier(rank, size int, name string) error {
	if err := b.put(fmt.Sprintf("%s.%d", name, rank), 1); err != nil {
		return err
	}
	for r := range size {
		if _, err := b.get(fmt.Sprintf("%s.%d", name, r)); err != nil {
			return err
		}
	}
	return nil
}

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
