package tmpfs

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestAllocateRetriesInterrupted: an allocation interrupted twice (as a
// 6.1 kernel's tmpfs does while the Go runtime signals the thread) is
// made whole by the third call; another error is returned as it is.
func TestAllocateRetriesInterrupted(t *testing.T) {
	fd, err := unix.MemfdCreate("knemesis-tmpfs-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	calls := 0
	fallocate = func(fd int, mode uint32, off, size int64) error {
		calls++
		if calls <= 2 {
			return unix.EINTR
		}
		return unix.Fallocate(fd, mode, off, size)
	}
	defer func() { fallocate = unix.Fallocate }()
	const size = 4 << 20
	if err := Allocate(fd, size); err != nil || calls != 3 {
		t.Fatalf("Allocate after two interruptions: %v in %d calls, want success in 3", err, calls)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 < size {
		t.Fatalf("after Allocate: %d bytes, %d allocated; want %d both", st.Size, st.Blocks*512, size)
	}
	calls = 0
	fallocate = func(int, uint32, int64, int64) error { calls++; return unix.ENOSPC }
	if err := Allocate(fd, size); err != unix.ENOSPC || calls != 1 {
		t.Fatalf("Allocate on a full file system: %v in %d calls, want ENOSPC in 1", err, calls)
	}
}
