package fdpass

import (
	"fmt"

	"github.com/knemesis/knemesis/internal/tmpfs"
	"golang.org/x/sys/unix"
)

// Seals are the seals every handed-over memfd carries: its size is fixed
// for good, and no seal can be added or removed any more.
const Seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// NewSealed makes a memfd of size bytes named name (shown in
// /proc/<pid>/maps), mode 0600, allocated whole (so that a machine short of
// memory fails here, not a later store with SIGBUS) and sealed with Seals.
// The descriptor is close-on-exec.
func NewSealed(name string, size int64) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("knemesis: memfd_create %s: %w", name, err)
	}
	if err := sizeAndSeal(fd, name, size, size); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// NewSealedSparse is NewSealed with only the first alloc bytes allocated
// now: the rest stays holes, which cost no memory until written (the
// caller allocates them before use, MADV_POPULATE_WRITE, so that a
// machine short of memory fails there rather than a store). The size is
// sealed all the same.
func NewSealedSparse(name string, size, alloc int64) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("knemesis: memfd_create %s: %w", name, err)
	}
	if err := sizeAndSeal(fd, name, size, min(alloc, size)); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func sizeAndSeal(fd int, name string, size, alloc int64) error {
	// A memfd is made 0777; only its descriptor reaches it, but a check
	// of "no access for others" on the receiving side then holds too.
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fmt.Errorf("knemesis: fchmod of memfd %s: %w", name, err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		return fmt.Errorf("knemesis: sizing memfd %s to %d bytes: %w", name, size, err)
	}
	if err := tmpfs.Allocate(fd, alloc); err != nil {
		return fmt.Errorf("knemesis: allocating the %d bytes of memfd %s: %w", alloc, name, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, Seals); err != nil {
		return fmt.Errorf("knemesis: sealing memfd %s: %w", name, err)
	}
	return nil
}
