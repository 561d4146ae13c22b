package knem

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestCreateWatchedRegion: the slot reads StatusSuccess while the buffer's
// pages are the region's, StatusFailed after MADV_DONTNEED of one of them
// or an munmap; a region of other memory keeps StatusSuccess; bad slots
// and single use are EINVAL.
func TestCreateWatchedRegion(t *testing.T) {
	d := open(t)
	info, err := d.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Features&FeatureInvalidate == 0 {
		t.Fatalf("GET_INFO features %#x lack FeatureInvalidate", info.Features)
	}
	s := mapStatus(t, d)
	buf := mmapBytes(t, 4*4096, unix.PROT_READ|unix.PROT_WRITE)
	other := mmapBytes(t, 4096, unix.PROT_READ|unix.PROT_WRITE)
	copy(buf, payload(41, len(buf)))
	c, err := d.CreateWatchedRegion([][]byte{buf}, ProtRead, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateWatchedRegion([][]byte{other}, ProtRead, 0, 2); err != nil {
		t.Fatal(err)
	}
	status := func(slot Slot) Status {
		st, err := s.Status(slot)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(1); st != StatusSuccess {
		t.Fatalf("slot of a new region: %v, want %v", st, StatusSuccess)
	}
	copy(buf, payload(42, len(buf))) // writes keep the pages
	if st := status(1); st != StatusSuccess {
		t.Fatalf("slot after writes: %v, want %v", st, StatusSuccess)
	}
	if err := unix.Madvise(buf[4096:8192], unix.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	if st := status(1); st != StatusFailed {
		t.Fatalf("slot after MADV_DONTNEED: %v, want %v", st, StatusFailed)
	}
	if st := status(2); st != StatusSuccess {
		t.Fatalf("slot of an untouched region: %v, want %v", st, StatusSuccess)
	}
	if err := d.DestroyRegion(c); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(1); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateWatchedRegion([][]byte{buf}, ProtRead, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Munmap(buf); err != nil {
		t.Fatal(err)
	}
	if st := status(1); st != StatusFailed {
		t.Fatalf("slot after munmap: %v, want %v", st, StatusFailed)
	}
	_, err = d.CreateWatchedRegion([][]byte{other}, ProtRead, 0, Slot(s.Len()))
	wantErrno(t, "slot past the array", err, unix.EINVAL)
	_, err = d.CreateWatchedRegion([][]byte{other}, ProtRead, FlagSingleUse, 3)
	wantErrno(t, "single use", err, unix.EINVAL)
	_, err = open(t).CreateWatchedRegion([][]byte{other}, ProtRead, 0, 0)
	wantErrno(t, "no status array", err, unix.EINVAL)
}
