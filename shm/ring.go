package shm

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/tmpfs"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/shmfile"
	"golang.org/x/sys/unix"
)

// The ring file: counters each in their own 128-byte block (the
// adjacent-line prefetcher pairs lines), the geometry and what the two
// sides publish about themselves, then one entry per slot of the ring,
// rounded up to whole pages; then the fixed ring's data slots, which stay
// holes in the file (no memory) unless the receiver cannot map the sender's
// pool. An entry (the transfer's id and where the piece is) is 128 bytes
// from the next: packed in one line, the sender's store of entry k+1 would
// steal the line from the receiver reading entry k, one more transfer
// between the cores per slot on top of the counters'.
const (
	offWritten = 0
	offRead    = 128
	offRevoked = 256
	offGeom    = 384
	offReach   = 392 // the receiver's verdict on the pool (reach*)
	offEntries = 512
	entryPitch = 128
)

// The receiver's verdict on the sender's pool, given when it opens the
// ring, before its CTS: it receives the pool from the sender's handover
// socket (pool.go), which needs no ptrace access, only the same user and a
// shared /dev/shm. Where it cannot, the pair uses the ring's own slots,
// MPICH's fixed ring. Until the verdict, the sender fills early into its
// pool; if the verdict goes against it, the receiver skips those pieces and
// Kept has the sender start over after its CTS. After the CTS the verdict
// is in.
const (
	reachUnknown = 0
	reachPool    = 1
	reachRing    = 2
)

// inRing marks an entry whose piece is in the ring's own data slot
// (number entry % entries), not in the sender's pool.
const inRing = 1 << 63

// ringHeaderSize is the bytes of a ring's counters and entries: one page
// for the default 16 entries. ringSize adds the fixed ring's data slots.
func ringHeaderSize(entries int) int { return (offEntries + entryPitch*entries + 4095) &^ 4095 }

func ringSize(entries, slotSize int) int { return ringHeaderSize(entries) + entries*slotSize }

// entry is one ring position alone in its 128-byte block.
type entry struct {
	owner atomic.Uint64 // the sender's id of the transfer the piece belongs to
	slot  atomic.Uint64 // the pool slot that holds the piece
	_     [entryPitch - 16]byte
}

type ring struct {
	mem     []byte
	written *atomic.Uint64 // advanced by the sender
	read    *atomic.Uint64 // advanced by the receiver
	revoked *atomic.Uint64 // id of the last transfer whose slots were skipped
	reach   *atomic.Uint64
	entries []entry
	data    []byte // the fixed ring's slots
	// verdict is reach as this side last saw it, kept once known.
	verdict uint64
	// blind is the sender's id of the last transfer that filled early
	// into the pool before the verdict.
	blind uint64
	path  string
	src   int // the sending rank
	dst   int // the receiving rank
	// mine is this side's own counter (written for the sender, read for
	// the receiver), kept here: what the peer may overwrite in the
	// mapping is only ever read for the peer's counter, and checked.
	mine   uint64
	broken bool
	// corrupt is the error of a peer's counter out of bounds: the ring
	// is unusable from then on.
	corrupt error
	// The sender's private record of the pool slots it published:
	// held[i % entries] for i in [reaped, mine), released once the
	// receiver's counter has passed them (-1: the ring's own slot).
	// Never read from the mapping, which the peer may overwrite.
	held   []int32
	reaped uint64
	busy   bool // listed in shm.busy
	// populated: the ring's own slots are allocated (populate).
	populated bool
	// rail: the ring carries ring pieces of Split messages, one at a
	// time, every entry the current one's (rail.go).
	rail bool

	// placed says where the receiver put the ring (placement.go).
	placed string
}

// The kinds of ring a pair has, named apart in /dev/shm: the stream's, and
// the rail's that carries ring pieces of Split messages (rail.go).
const (
	streamRing = "lmt"
	railRing   = "rail"
)

// ringPath names the ring of kind of the ordered pair in /dev/shm: the
// job's name, the pair, and, when the job has a key, a part of it that
// nobody outside the job can guess.
func ringPath(env *lmt.Env, kind string, src, dst int) string {
	path := "/dev/shm/knemesis-" + env.Job + "-" + kind + "-" + strconv.Itoa(src) + "-" + strconv.Itoa(dst)
	if !env.Key.IsZero() {
		path += "-" + env.Key.Name("lmt/shm-ring")
	}
	return path
}

// ringObject names the ring in shmfile's errors.
func ringObject(kind string, src, dst int) string {
	return "shm " + kind + " ring from rank " + strconv.Itoa(src) + " to rank " + strconv.Itoa(dst)
}

// open maps the ring of kind of the ordered pair, creating it if this side
// comes first; both sides ask for the same size, so the order does not
// matter.
func (s *shm) open(src, dst int, kind string) (*ring, error) {
	path := ringPath(s.env, kind, src, dst)
	size, hdr := ringSize(int(s.slots), s.slotSize), ringHeaderSize(int(s.slots))
	fd, _, err := shmfile.OpenOrCreate(path, ringObject(kind, src, dst))
	if err != nil {
		return nil, fmt.Errorf("lmt: shm ring: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, fmt.Errorf("lmt: sizing shm ring %s to %d bytes: %w", path, size, err)
	}
	// The header is allocated now: a full /dev/shm fails this
	// transfer's start with ENOSPC instead of a later store with SIGBUS.
	if err := tmpfs.Allocate(fd, int64(hdr)); err != nil && err != unix.EOPNOTSUPP {
		unix.Unlink(path)
		return nil, fmt.Errorf("lmt: reserving %d bytes for shm ring %s: %w", hdr, path, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("lmt: mapping shm ring %s: %w", path, err)
	}
	geom := s.slots<<48 | uint64(s.poolSlots)<<32 | uint64(s.slotSize)
	g := (*atomic.Uint64)(unsafe.Pointer(&mem[offGeom]))
	if !g.CompareAndSwap(0, geom) {
		// Read once, before the unmap: the error reports the copy.
		if got := g.Load(); got != geom {
			unix.Munmap(mem)
			return nil, fmt.Errorf("lmt: shm ring %s has %d entries, pools of %d slots of %d bytes; this rank wants %d, %d of %d (lmt.Config differs between ranks)",
				path, got>>48, uint16(got>>32), uint32(got), s.slots, s.poolSlots, s.slotSize)
		}
	}
	r := &ring{
		mem:     mem,
		written: (*atomic.Uint64)(unsafe.Pointer(&mem[offWritten])),
		read:    (*atomic.Uint64)(unsafe.Pointer(&mem[offRead])),
		revoked: (*atomic.Uint64)(unsafe.Pointer(&mem[offRevoked])),
		reach:   (*atomic.Uint64)(unsafe.Pointer(&mem[offReach])),
		entries: unsafe.Slice((*entry)(unsafe.Pointer(&mem[offEntries])), s.slots),
		data:    mem[hdr:],
		path:    path,
		src:     src,
		dst:     dst,
		rail:    kind == railRing,
	}
	// Only this side advances its counter, which a new ring holds at 0;
	// the peer's is checked against it on every read.
	if src == s.env.Rank {
		r.mine = r.written.Load()
		r.reaped = r.mine
		r.held = make([]int32, s.slots)
	} else {
		r.mine = r.read.Load()
		r.place()
	}
	return r, nil
}

// name names r in errors: the stream's ring or the rail's, and its pair.
func (r *ring) name() string {
	kind := "the shm ring"
	if r.rail {
		kind = "the shm rail ring"
	}
	return kind + " from rank " + strconv.Itoa(r.src) + " to rank " + strconv.Itoa(r.dst)
}

// populate allocates the ring's own slots before the sender's first piece
// goes there: a /dev/shm too full for them fails the transfer with ENOSPC
// instead of a store with SIGBUS (MADV_POPULATE_WRITE, Linux 5.14; older
// kernels answer EINVAL and keep the risk).
func (r *ring) populate() error {
	err := unix.Madvise(r.data, unix.MADV_POPULATE_WRITE)
	if err != nil && err != unix.EINVAL {
		r.broken = true
		return fmt.Errorf("lmt: /dev/shm cannot hold the %d bytes of the fixed shm ring from rank %d to rank %d: %w", len(r.data), r.src, r.dst, err)
	}
	r.populated = true
	return nil
}
