package knem

// Every copy command, in both directions, on every engine, moves exactly
// the right bytes: checked by checksum and by guard bytes around the
// destination.

import (
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

type engine struct {
	name  string
	flags Flags
	dma   bool // needs a DMA_MEMCPY channel
}

var engines = []engine{
	{"cpu", 0, false},
	{"cpu-pinlocal", FlagPinLocal, false},
	{"memcpythread", FlagMemcpyThread, false},
	{"dma", FlagDMA, true},
	{"dma-async", FlagDMA | FlagAsyncDMAComplete, true},
	{"dmathread", FlagDMA | FlagDMAThread, true},
}

// transfer moves src into dst through one command; it returns the status
// of the call and the slot the copy may complete in.
type transfer func(t *testing.T, d *Device, s *StatusArray, src, dst [][]byte, flags Flags) (Status, Slot)

var transfers = []struct {
	name string
	run  transfer
}{
	{"inline-read", func(t *testing.T, d *Device, s *StatusArray, src, dst [][]byte, f Flags) (Status, Slot) {
		c := region(t, d, src, ProtRead, 0)
		return inline(t, d, s, Read, dst, c, All, f)
	}},
	{"inline-write", func(t *testing.T, d *Device, s *StatusArray, src, dst [][]byte, f Flags) (Status, Slot) {
		c := region(t, d, dst, ProtWrite, 0)
		return inline(t, d, s, Write, src, c, All, f)
	}},
	{"inline-read-bounded", func(t *testing.T, d *Device, s *StatusArray, src, dst [][]byte, f Flags) (Status, Slot) {
		c := region(t, d, src, ProtRead, FlagSingleUse)
		return inline(t, d, s, Read, dst, c, total(src), f)
	}},
	{"inline-write-bounded", func(t *testing.T, d *Device, s *StatusArray, src, dst [][]byte, f Flags) (Status, Slot) {
		c := region(t, d, dst, ProtRead|ProtWrite, FlagSingleUse)
		return inline(t, d, s, Write, src, c, total(src), f)
	}},
	{"copy", func(t *testing.T, d *Device, s *StatusArray, src, dst [][]byte, f Flags) (Status, Slot) {
		sc := region(t, d, src, ProtRead, 0)
		dc := region(t, d, dst, ProtWrite, 0)
		return regionCopy(t, d, s, sc, dc, All, f)
	}},
	{"copy-bounded", func(t *testing.T, d *Device, s *StatusArray, src, dst [][]byte, f Flags) (Status, Slot) {
		sc := region(t, d, src, ProtRead, FlagSingleUse)
		dc := region(t, d, dst, ProtWrite, FlagSingleUse)
		return regionCopy(t, d, s, sc, dc, total(src), f)
	}},
	{"old-sync-recv", func(t *testing.T, d *Device, s *StatusArray, src, dst [][]byte, f Flags) (Status, Slot) {
		send, err := d.InitSend(src, 0)
		if err != nil {
			t.Fatal(err)
		}
		st, err := d.SyncRecv(dst, send, f)
		if err != nil {
			t.Fatalf("SYNC_RECV: %v", err)
		}
		return st, 0
	}},
	{"old-async-recv", func(t *testing.T, d *Device, s *StatusArray, src, dst [][]byte, f Flags) (Status, Slot) {
		send, err := d.InitSend(src, 0)
		if err != nil {
			t.Fatal(err)
		}
		slot, _ := s.Alloc()
		if err := d.InitAsyncRecv(dst, send, f, slot); err != nil {
			t.Fatalf("INIT_ASYNC_RECV: %v", err)
		}
		return StatusPending, slot // the outcome is always in the slot
	}},
}

func total(bufs [][]byte) uint64 {
	var n uint64
	for _, b := range bufs {
		n += uint64(len(b))
	}
	return n
}

func inline(t *testing.T, d *Device, s *StatusArray, dir Direction, local [][]byte, c Cookie, length uint64, f Flags) (Status, Slot) {
	slot, _ := s.Alloc()
	st, err := d.InlineCopy(dir, local, c, 0, length, f, slot)
	if err != nil {
		t.Fatalf("inline copy (flags %#x): %v", f, err)
	}
	return st, slot
}

func regionCopy(t *testing.T, d *Device, s *StatusArray, src, dst Cookie, length uint64, f Flags) (Status, Slot) {
	slot, _ := s.Alloc()
	st, err := d.Copy(src, 0, dst, 0, length, f, slot)
	if err != nil {
		t.Fatalf("COPY (flags %#x): %v", f, err)
	}
	return st, slot
}

func TestCopyIntegrity(t *testing.T) {
	d := open(t)
	s := mapStatus(t, d)
	info, err := d.Info()
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{1, 4096, 100003, 1<<20 + 4097}
	for _, e := range engines {
		for _, tr := range transfers {
			for i, n := range sizes {
				t.Run(fmt.Sprintf("%s/%s/%d", e.name, tr.name, n), func(t *testing.T) {
					if e.dma && info.Features&FeatureDMA == 0 {
						needDMA(t, d)
					}
					src := payload(uint64(n)+uint64(i), n)
					dst := newGuarded(n)
					// Odd cuts: iovec boundaries fall inside pages and
					// differ between the two sides.
					srcIov := split(src, n/3, n/3+1, n/2+17)
					dstIov := split(dst.body, n/5, n/5+4095, n-7)
					st, slot := tr.run(t, d, s, srcIov, dstIov, e.flags)
					wait(t, s, slot, st, tr.name)
					s.Free(slot)
					dst.check(t, tr.name, src)
				})
			}
		}
	}
}

// TestAsyncCopiesOverlap keeps many asynchronous copies in flight at once
// and checks each one's data and slot.
func TestAsyncCopiesOverlap(t *testing.T) {
	d := open(t)
	s := mapStatus(t, d)
	flags := []Flags{FlagMemcpyThread}
	if info, _ := d.Info(); info.Features&FeatureDMA != 0 {
		flags = append(flags, FlagDMA|FlagAsyncDMAComplete, FlagDMA|FlagDMAThread)
	} else if inGuest {
		t.Fatal("no DMA feature in the guest")
	}
	for _, f := range flags {
		const copies, n = 32, 64<<10 + 5
		srcs := make([][]byte, copies)
		dsts := make([]guarded, copies)
		slots := make([]Slot, copies)
		for i := range copies {
			srcs[i] = payload(uint64(i)*7+uint64(f), n)
			dsts[i] = newGuarded(n)
			c := region(t, d, [][]byte{srcs[i]}, ProtRead, FlagSingleUse)
			var ok bool
			if slots[i], ok = s.Alloc(); !ok {
				t.Fatal("no free slot")
			}
			st, err := d.InlineCopy(Read, [][]byte{dsts[i].body}, c, 0, All, f, slots[i])
			if err != nil {
				t.Fatalf("copy %d (flags %#x): %v", i, f, err)
			}
			if st == StatusSuccess {
				s.Free(slots[i])
				slots[i] = ^Slot(0)
			}
		}
		for i := range copies {
			if slots[i] != ^Slot(0) {
				wait(t, s, slots[i], StatusPending, fmt.Sprintf("copy %d flags %#x", i, f))
				s.Free(slots[i])
			}
			dsts[i].check(t, fmt.Sprintf("copy %d flags %#x", i, f), srcs[i])
		}
	}
}

func TestNotifyFD(t *testing.T) {
	d := open(t)
	s := mapStatus(t, d)
	const copies = 8
	want := make(map[Slot]guarded)
	srcs := make(map[Slot][]byte)
	for i := range copies {
		src := payload(uint64(100+i), 200000)
		dst := newGuarded(len(src))
		c := region(t, d, [][]byte{src}, ProtRead, 0)
		slot, _ := s.Alloc()
		st, err := d.InlineCopy(Read, [][]byte{dst.body}, c, 0, All, FlagMemcpyThread|FlagNotifyFD, slot)
		if err != nil {
			t.Fatal(err)
		}
		if st != StatusPending {
			t.Fatalf("a kernel-thread copy of 200000 bytes returned %v, not pending", st)
		}
		want[slot], srcs[slot] = dst, src
	}
	got := make([]Slot, copies)
	seen := 0
	for seen < copies {
		n, err := d.Notifications(got, 30e9)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("%d of %d notifications after 30s", seen, copies)
		}
		for _, slot := range got[:n] {
			dst, ok := want[slot]
			if !ok {
				t.Fatalf("notification for slot %d, which no copy used (or twice)", slot)
			}
			if st, err := s.Status(slot); st != StatusSuccess || err != nil {
				t.Fatalf("slot %d notified with status %v, %v", slot, st, err)
			}
			dst.check(t, "notified copy", srcs[slot])
			delete(want, slot)
			seen++
		}
	}
	// Nothing more is queued.
	if n, err := d.Notifications(got, 0); n != 0 || err != nil {
		t.Fatalf("extra notifications: %d, %v", n, err)
	}
}

func TestBindOffload(t *testing.T) {
	d := open(t)
	s := mapStatus(t, d)
	if runtime.NumCPU() < 2 {
		t.Skip("lacks two-cpus: BIND_OFFLOAD CURRENT_REVERSED needs 2 CPUs")
	}
	// Bind this thread to CPU 0, so that CURRENT is {0} and
	// CURRENT_REVERSED the other CPUs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, cpu0, cpu1, empty unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &all)
	cpu0.Set(0)
	cpu1.Set(1)
	if err := unix.SchedSetaffinity(0, &cpu0); err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		flags BindFlags
		mask  *unix.CPUSet
	}{
		{BindCurrent, nil},
		{BindCurrentReversed, nil},
		{BindCustom, &cpu1},
		{BindCustom, &cpu0},
	} {
		if err := d.BindOffload(b.flags, b.mask); err != nil {
			t.Fatalf("BIND_OFFLOAD %#x: %v", b.flags, err)
		}
		src := payload(uint64(b.flags), 50000)
		dst := newGuarded(len(src))
		c := region(t, d, [][]byte{src}, ProtRead, FlagSingleUse)
		slot, _ := s.Alloc()
		st, err := d.InlineCopy(Read, [][]byte{dst.body}, c, 0, All, FlagMemcpyThread, slot)
		if err != nil {
			t.Fatal(err)
		}
		wait(t, s, slot, st, "copy on the bound thread")
		s.Free(slot)
		dst.check(t, "copy on the bound thread", src)
	}
	wantErrno(t, "BIND_OFFLOAD with an unknown flag", d.BindOffload(1<<5, nil), unix.EINVAL)
	// As in KNEM 1.1, a request naming no usable CPU is no error: the
	// copies run on the caller's CPUs (semantics.c checks where).
	if err := d.BindOffload(BindCustom, &empty); err != nil {
		t.Fatalf("BIND_OFFLOAD CUSTOM with an empty mask: %v", err)
	}
	if err := d.BindOffload(BindCustom, nil); err != nil {
		t.Fatalf("BIND_OFFLOAD CUSTOM without a mask: %v", err)
	}
	if err := unix.SchedSetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	if err := d.BindOffload(BindCurrentReversed, nil); err != nil {
		t.Fatalf("BIND_OFFLOAD CURRENT_REVERSED allowed everywhere: %v", err)
	}
}

func TestStatistics(t *testing.T) {
	d := open(t)
	before, err := Stats()
	if err != nil {
		t.Fatal(err)
	}
	if len(before) == 0 {
		t.Fatal("read() of a read-only descriptor returned no statistics")
	}
	c := region(t, d, [][]byte{payload(9, 12345)}, ProtRead, 0)
	if _, err := d.InlineCopy(Read, [][]byte{make([]byte, 12345)}, c, 0, All, 0, 0); err != nil {
		t.Fatal(err)
	}
	after, err := Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatalf("statistics did not change after a region and a copy:\n%s", after)
	}
	t.Logf("statistics:\n%s", after)
}

// TestDestroyDuringAsyncCopy destroys the source region, and then closes
// the source's descriptor, while a kernel-thread copy from it runs: the copy
// holds its own reference, completes with the right bytes, and the pages
// are unpinned once it is done.
func TestDestroyDuringAsyncCopy(t *testing.T) {
	d := open(t)
	owner, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	s := mapStatus(t, d)
	src := payload(42, 16<<20+5)
	dst := newGuarded(len(src))
	c, err := owner.CreateRegion(split(src, 4097, 8<<20), ProtRead, 0)
	if err != nil {
		t.Fatal(err)
	}
	slot, _ := s.Alloc()
	st, err := d.InlineCopy(Read, [][]byte{dst.body}, c, 0, All, FlagMemcpyThread, slot)
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.DestroyRegion(c); err != nil {
		t.Fatalf("destroying a region with a copy in flight: %v", err)
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	wait(t, s, slot, st, "copy from a region destroyed while it ran")
	dst.check(t, "copy from a destroyed region", src)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	waitUnpinned(t, "after the copy from a destroyed region")
}
