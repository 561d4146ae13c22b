package knem

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem/internal/uapi"
)

// These tests run everywhere: they need no driver.

func TestOpenWithoutDevice(t *testing.T) {
	_, err := OpenPath(filepath.Join(t.TempDir(), "knem"))
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("OpenPath(missing) = %v, want ErrNoDevice", err)
	}
}

// TestReadInfoWithoutDriver: a missing node is ErrNoDevice with its errno;
// a node that is not the driver answers GET_INFO with ENOTTY, named.
func TestReadInfoWithoutDriver(t *testing.T) {
	_, err := ReadInfo(filepath.Join(t.TempDir(), "knem"))
	if !errors.Is(err, ErrNoDevice) || !errors.Is(err, unix.ENOENT) {
		t.Errorf("ReadInfo(missing) = %v, want ErrNoDevice and ENOENT", err)
	}
	_, err = ReadInfo("/dev/null")
	var ke *Error
	if !errors.Is(err, unix.ENOTTY) || !errors.As(err, &ke) || ke.Op != "GET_INFO" {
		t.Errorf("ReadInfo(/dev/null) = %v, want a GET_INFO error with ENOTTY", err)
	}
}

func TestErrorKeepsErrnoAndNamesCommand(t *testing.T) {
	d := &Device{fd: -1}
	_, err := d.CreateRegion([][]byte{make([]byte, 8)}, ProtRead, 0)
	if !errors.Is(err, unix.EBADF) {
		t.Fatalf("CreateRegion on a closed device: %v, want EBADF", err)
	}
	var ke *Error
	if !errors.As(err, &ke) || ke.Op != "CREATE_REGION" {
		t.Fatalf("error %v does not name CREATE_REGION", err)
	}
	if got, want := err.Error(), "knem: CREATE_REGION: bad file descriptor"; got != want {
		t.Fatalf("message %q, want %q", got, want)
	}
}

func TestIovecsDescribeBuffers(t *testing.T) {
	a, b := make([]byte, 100), make([]byte, 3)
	var stack [stackIovecs]uapi.ParamIovec
	iov, err := iovecs(&stack, [][]byte{a, nil, b})
	if err != nil {
		t.Fatal(err)
	}
	want := []uapi.ParamIovec{
		{Base: uint64(uintptr(unsafe.Pointer(&a[0]))), Len: 100},
		{Base: 0, Len: 0},
		{Base: uint64(uintptr(unsafe.Pointer(&b[0]))), Len: 3},
	}
	if len(iov) != len(want) {
		t.Fatalf("%d iovecs, want %d", len(iov), len(want))
	}
	for i := range want {
		if iov[i] != want[i] {
			t.Errorf("iovec %d = %+v, want %+v", i, iov[i], want[i])
		}
	}
	if &iov[0] != &stack[0] {
		t.Error("a short list did not use the caller's stack array")
	}
	many := make([][]byte, stackIovecs+1)
	iov, _ = iovecs(&stack, many)
	if len(iov) != stackIovecs+1 {
		t.Errorf("%d buffers gave %d iovecs", stackIovecs+1, len(iov))
	}
}

// anonArray is a status array over anonymous memory, standing in for the
// driver's mapping.
func anonArray(t *testing.T, n int) *StatusArray {
	t.Helper()
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	s := newStatusArray(mem)
	t.Cleanup(func() { s.Unmap() })
	return s
}

func TestStatusSlotsAreDistinctUntilFreed(t *testing.T) {
	s := anonArray(t, 4096)
	if s.Len() != 4096 {
		t.Fatalf("Len %d, want 4096", s.Len())
	}
	seen := make(map[Slot]bool)
	for range 4096 {
		slot, ok := s.Alloc()
		if !ok {
			t.Fatalf("Alloc failed after %d slots", len(seen))
		}
		if seen[slot] || int(slot) >= s.Len() {
			t.Fatalf("Alloc returned slot %d twice or out of range", slot)
		}
		seen[slot] = true
	}
	if slot, ok := s.Alloc(); ok {
		t.Fatalf("Alloc on a full array returned slot %d", slot)
	}
	s.Free(77)
	if slot, ok := s.Alloc(); !ok || slot != 77 {
		t.Fatalf("after Free(77), Alloc = %d, %v", slot, ok)
	}
}

func TestStatusArraySizeNotMultipleOf64(t *testing.T) {
	mem := make([]byte, 100) // only the bitmap is exercised
	s := newStatusArray(mem)
	n := 0
	for {
		slot, ok := s.Alloc()
		if !ok {
			break
		}
		if int(slot) >= 100 {
			t.Fatalf("slot %d beyond a 100-slot array", slot)
		}
		n++
	}
	if n != 100 {
		t.Fatalf("allocated %d slots of 100", n)
	}
}

func TestStatusBytesAreIndependent(t *testing.T) {
	s := anonArray(t, 4096)
	for i := range Slot(8) {
		s.set(i, Status(i%3))
	}
	for i := range Slot(8) {
		if got, _ := s.Status(i); got != Status(i%3) {
			t.Errorf("slot %d = %v, want %v", i, got, Status(i%3))
		}
		if s.mem[i] != byte(i%3) {
			t.Errorf("byte %d = %d: the driver would read another value", i, s.mem[i])
		}
	}
	s.set(1, StatusFailed)
	s.set(3, StatusSuccess)
	s.Reset(2)
	st := func(slot Slot) Status { v, _ := s.Status(slot); return v }
	if st(2) != StatusPending || st(1) != StatusFailed || st(3) != StatusSuccess {
		t.Errorf("Reset(2) touched its neighbour")
	}
}

func TestStatusAllocConcurrent(t *testing.T) {
	s := anonArray(t, 4096)
	const workers, each = 4, 500
	var wg sync.WaitGroup
	got := make([][]Slot, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				slot, ok := s.Alloc()
				if !ok {
					t.Error("Alloc failed with free slots left")
					return
				}
				got[w] = append(got[w], slot)
			}
		}()
	}
	wg.Wait()
	seen := make(map[Slot]bool)
	for _, sl := range got {
		for _, slot := range sl {
			if seen[slot] {
				t.Fatalf("slot %d handed out twice", slot)
			}
			seen[slot] = true
		}
	}
	if len(seen) != workers*each {
		t.Fatalf("%d distinct slots, want %d", len(seen), workers*each)
	}
}

func TestStatusHotPathDoesNotAllocate(t *testing.T) {
	s := anonArray(t, 4096)
	allocs := testing.AllocsPerRun(1000, func() {
		slot, _ := s.Alloc()
		s.set(slot, StatusSuccess)
		if st, err := s.Status(slot); st != StatusSuccess || err != nil {
			t.Fatal("status lost")
		}
		s.Free(slot)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per slot cycle", allocs)
	}
}

// TestStatusSlotPastTheEnd: every method given a slot the array does not
// have returns ErrSlot naming it, instead of indexing past the mapping or
// the bitmap, and leaves the array as it was.
func TestStatusSlotPastTheEnd(t *testing.T) {
	s := anonArray(t, 4096)
	slot, ok := s.Alloc()
	if !ok {
		t.Fatal("Alloc failed on an empty array")
	}
	for _, bad := range []Slot{4096, 4099, 1<<32 - 1} {
		want := fmt.Sprintf("slot past the end of the status array: slot %d, array of 4096", bad)
		st, err := s.Status(bad)
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, ErrSlot) || err.Error() != "knem: StatusArray."+op+": "+want {
				t.Errorf("%s(%d) = %v, want ErrSlot: %s", op, bad, err, want)
			}
		}
		check("Status", err)
		if st != 0 {
			t.Errorf("Status(%d) = %v with its error, want 0", bad, st)
		}
		check("Free", s.Free(bad))
		check("Reset", s.Reset(bad))
		_, err = s.Wait(bad, time.Second)
		check("Wait", err)
	}
	if st, err := s.Status(slot); st != StatusPending || err != nil {
		t.Errorf("slot %d after the refusals: %v, %v; want pending", slot, st, err)
	}
	if next, ok := s.Alloc(); !ok || next == slot {
		t.Errorf("Alloc after the refusals = %d, %v: the bitmap changed", next, ok)
	}
	// An unmapped array has no slot at all.
	u := anonArray(t, 4096)
	if err := u.Unmap(); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Status(0); !errors.Is(err, ErrSlot) {
		t.Errorf("Status(0) of an unmapped array = %v, want ErrSlot", err)
	}
}
