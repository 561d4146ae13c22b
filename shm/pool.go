package shm

import (
	"fmt"
	"os"
	"strconv"

	"github.com/knemesis/knemesis/internal/slotpool"
	"github.com/knemesis/knemesis/internal/tmpfs"
	"golang.org/x/sys/unix"
)

// pool is a rank's slots as one mapping of a memfd: its own, which it
// claims from and releases into, or a sender's, mapped read-only by a
// receiver.
type pool struct {
	fd    int // -1 for a peer's pool (closed once mapped)
	mem   []byte
	slots *slotpool.Pool
}

// poolSeals make the pool's size fixed for good: a receiver that checked
// it cannot be made to fault (SIGBUS) by a sender that shrinks it later.
const poolSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

func poolBytes(n, slotSize int) int { return (slotpool.Size(n, slotSize) + 4095) &^ 4095 }

// poolName is the memfd's name, which /proc/<pid>/fd shows its receivers:
// job and rank, so a pid that names another process finds no such pool.
func poolName(job string, rank int) string {
	return "knemesis-" + job + "-lmtpool-" + strconv.Itoa(rank)
}

// newPool creates this rank's pool and allocates all of it now, so that a
// machine short of memory fails the Engine's creation (the job's Join)
// rather than a copy with SIGBUS. It is a memfd, not a /dev/shm file: it
// has no name to leave behind however the rank dies, and does not count
// against a container's small /dev/shm.
func newPool(job string, rank, n, slotSize int) (*pool, error) {
	size := poolBytes(n, slotSize)
	fd, err := unix.MemfdCreate(poolName(job, rank), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("lmt: shm pool: memfd_create: %w", err)
	}
	p := &pool{fd: fd}
	if err := p.reserve(size); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if p.mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lmt: mapping the shm pool: %w", err)
	}
	if p.slots, err = slotpool.New(p.mem, n, slotSize); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *pool) reserve(size int) error {
	if err := unix.Ftruncate(p.fd, int64(size)); err != nil {
		return fmt.Errorf("lmt: sizing the shm pool to %d bytes: %w", size, err)
	}
	if err := tmpfs.Allocate(p.fd, int64(size)); err != nil {
		return fmt.Errorf("lmt: allocating the shm pool's %d bytes (not enough memory for this rank's large-message slots; lower lmt.Config.ShmPoolSlots): %w", size, err)
	}
	if _, err := unix.FcntlInt(uintptr(p.fd), unix.F_ADD_SEALS, poolSeals); err != nil {
		return fmt.Errorf("lmt: sealing the shm pool: %w", err)
	}
	return nil
}

// mapPeerPool maps the pool of rank src, which its process holds as a
// memfd named poolName: it is found among /proc/<pid>/fd, which opens a
// file of a process of the same user, and checked (sealed, of the size
// this geometry needs) before it is mapped.
func mapPeerPool(job string, src, pid, n, slotSize int) (*pool, error) {
	size := poolBytes(n, slotSize)
	path, err := findMemfd("/proc/"+strconv.Itoa(pid)+"/fd", "/memfd:"+poolName(job, src)+" (deleted)")
	if err != nil {
		return nil, fmt.Errorf("lmt: finding rank %d's shm pool: %w", src, err)
	}
	f, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lmt: opening rank %d's shm pool %s: %w", src, path, err)
	}
	defer unix.Close(f)
	var st unix.Stat_t
	if err := unix.Fstat(f, &st); err != nil {
		return nil, fmt.Errorf("lmt: fstat of rank %d's shm pool: %w", src, err)
	}
	seals, err := unix.FcntlInt(uintptr(f), unix.F_GET_SEALS, 0)
	if err != nil || seals&poolSeals != poolSeals || st.Size != int64(size) {
		return nil, fmt.Errorf("lmt: rank %d's shm pool %s is %d bytes with seals %#x (%v), not a sealed pool of %d bytes (lmt.Config differs between ranks?)", src, path, st.Size, seals, err, size)
	}
	mem, err := unix.Mmap(f, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("lmt: mapping rank %d's shm pool: %w", src, err)
	}
	p := &pool{fd: -1, mem: mem}
	if p.slots, err = slotpool.New(mem, n, slotSize); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// findMemfd returns the entry of directory fds (a /proc/<pid>/fd) that
// links to target.
func findMemfd(fds, target string) (string, error) {
	d, err := os.Open(fds)
	if err != nil {
		return "", err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return "", err
	}
	for _, name := range names {
		if l, err := os.Readlink(fds + "/" + name); err == nil && l == target {
			return fds + "/" + name, nil
		}
	}
	return "", fmt.Errorf("no descriptor of %s links to %s", fds, target)
}

func (p *pool) close() {
	if p.mem != nil {
		unix.Munmap(p.mem)
		p.mem = nil
	}
	if p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}
