package shm

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/slotpool"
	"github.com/knemesis/knemesis/lmt"
	"golang.org/x/sys/unix"
)

// pool is a rank's slots as one mapping of a memfd: its own, which it
// claims from and releases into, or a sender's, mapped read-only by a
// receiver.
type pool struct {
	fd    int // -1 for a peer's pool (closed once mapped)
	mem   []byte
	slots *slotpool.Pool
	token uint64
}

// The pool's first page holds its token, a random number the sender also
// publishes in its rings: a receiver that opened /proc/<pid>/fd/<fd>
// checks it, so that a stale or foreign pid cannot hand it another
// process's memory. The slots follow.
const poolHead = 4096

// poolSeals make the pool's size fixed for good: a receiver that checked
// it cannot be made to fault (SIGBUS) by a sender that shrinks it later.
const poolSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

func poolBytes(n, slotSize int) int { return poolHead + (slotpool.Size(n, slotSize)+4095)&^4095 }

func (p *pool) headToken() uint64 { return (*atomic.Uint64)(unsafe.Pointer(&p.mem[0])).Load() }

// newPool creates this rank's pool and allocates all of it now, so that a
// machine short of memory fails the Engine's creation (the job's Join)
// rather than a copy with SIGBUS. It is a memfd, not a /dev/shm file: it
// has no name to leave behind however the rank dies, and does not count
// against a container's small /dev/shm.
func newPool(job string, rank, n, slotSize int) (*pool, error) {
	size := poolBytes(n, slotSize)
	fd, err := unix.MemfdCreate("knemesis-"+job+"-lmtpool-"+strconv.Itoa(rank), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
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
	if p.slots, err = slotpool.New(p.mem[poolHead:], n, slotSize); err != nil {
		p.close()
		return nil, err
	}
	var b [8]byte
	if _, err := unix.Getrandom(b[:], 0); err != nil {
		p.close()
		return nil, fmt.Errorf("lmt: shm pool token: getrandom: %w", err)
	}
	p.token = binary.LittleEndian.Uint64(b[:]) | 1 // never 0, the unpublished value
	(*atomic.Uint64)(unsafe.Pointer(&p.mem[0])).Store(p.token)
	return p, nil
}

func (p *pool) reserve(size int) error {
	if err := unix.Ftruncate(p.fd, int64(size)); err != nil {
		return fmt.Errorf("lmt: sizing the shm pool to %d bytes: %w", size, err)
	}
	if err := unix.Fallocate(p.fd, 0, 0, int64(size)); err != nil {
		return fmt.Errorf("lmt: allocating the shm pool's %d bytes (not enough memory for this rank's large-message slots; lower lmt.Config.ShmPoolSlots): %w", size, err)
	}
	if _, err := unix.FcntlInt(uintptr(p.fd), unix.F_ADD_SEALS, poolSeals); err != nil {
		return fmt.Errorf("lmt: sealing the shm pool: %w", err)
	}
	return nil
}

// mapPeerPool maps the pool of rank src, whose process holds it as
// descriptor fd: /proc/<pid>/fd/<fd> opens that file for a process of the
// same user. The descriptor number comes from the ring, which the peer can
// write, so the file is checked: sealed at the size this geometry needs.
func mapPeerPool(src, pid, fd int, token uint64, n, slotSize int) (*pool, error) {
	size := poolBytes(n, slotSize)
	path := "/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.Itoa(fd)
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
		return nil, lmt.Corrupt(src, "pool descriptor of an shm ring",
			"descriptor %d is a file of %d bytes with seals %#x (%v), not a sealed pool of %d bytes", fd, st.Size, seals, err, size)
	}
	mem, err := unix.Mmap(f, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("lmt: mapping rank %d's shm pool: %w", src, err)
	}
	p := &pool{fd: -1, mem: mem}
	if got := p.headToken(); got != token {
		p.close()
		return nil, lmt.Corrupt(src, "pool of an shm ring", "%s holds token %#x, the ring names %#x: not this job's rank %d", path, got, token, src)
	}
	if p.slots, err = slotpool.New(mem[poolHead:], n, slotSize); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
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
