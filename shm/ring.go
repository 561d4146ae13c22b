package shm

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/fdpass"
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

// The kinds of ring a pair has, served apart by the receiver: the
// stream's, and the rail's that carries ring pieces of Split messages
// (rail.go).
const (
	streamRing = "lmt"
	railRing   = "rail"
)

// ringOwner is the rank that makes the ring of kind from src to dst and
// serves it: the sender for the stream's (made at its first Check of the
// peer, before any RTS to it, so that its first message may fill early
// into the pool), the receiver for the rail's (made before its CTS, the
// first time a message of the pair takes the rail, whose sender comes
// only after that CTS).
func ringOwner(kind string, src, dst int) int {
	if kind == railRing {
		return dst
	}
	return src
}

// ringServed is the name under which the owner serves the ring of kind
// from src to dst (fdpass).
func ringServed(kind string, src, dst int) string {
	return "ring-" + kind + "-" + strconv.Itoa(src) + "-" + strconv.Itoa(dst)
}

// ringObject names the ring in errors.
func ringObject(kind string, src, dst int) string {
	return "shm " + kind + " ring from rank " + strconv.Itoa(src) + " to rank " + strconv.Itoa(dst)
}

// open maps the ring of kind of the ordered pair. The ring is a sealed
// memfd (fdpass), so that no rank can shrink it under the other (SIGBUS)
// or grow it, and it has no name in /dev/shm for another user to take
// first or for a crash to leave behind. Its owner (ringOwner) makes it,
// writes the geometry and serves it from this rank's handover socket
// (pool.go), before the other side can need it; the other side receives it
// from there, checked sealed and of this geometry's size before it maps
// it.
func (s *shm) open(src, dst int, kind string) (*ring, error) {
	size, hdr := ringSize(int(s.slots), s.slotSize), ringHeaderSize(int(s.slots))
	object := ringObject(kind, src, dst)
	owner := ringOwner(kind, src, dst)
	var fd int
	var err error
	if owner == s.env.Rank {
		// The header is allocated now: a machine short of memory fails
		// here instead of a later store. The fixed ring's slots stay
		// holes until populate.
		fd, err = fdpass.NewSealedSparse("knemesis-lmtring", int64(size), int64(hdr))
	} else {
		fd, _, err = fdpass.Fetch(poolDir(s.env, owner), ringServed(kind, src, dst), object, fdpass.Want{Size: int64(size)})
	}
	if err != nil {
		return nil, fmt.Errorf("lmt: %s: %w", object, err)
	}
	defer unix.Close(fd)
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("lmt: mapping %s: %w", object, err)
	}
	geom := s.slots<<48 | uint64(s.poolSlots)<<32 | uint64(s.slotSize)
	g := (*atomic.Uint64)(unsafe.Pointer(&mem[offGeom]))
	if owner == s.env.Rank {
		g.Store(geom) // before serving: the other side finds it set
		if err := s.srv.Serve(ringServed(kind, src, dst), fd); err != nil {
			unix.Munmap(mem)
			return nil, fmt.Errorf("lmt: serving %s: %w", object, err)
		}
	} else if got := g.Load(); got != geom {
		// Read once, before the unmap: the error reports the copy.
		unix.Munmap(mem)
		return nil, fmt.Errorf("lmt: %s has %d entries, pools of %d slots of %d bytes; this rank wants %d, %d of %d (lmt.Config differs between ranks)",
			object, got>>48, uint16(got>>32), uint32(got), s.slots, s.poolSlots, s.slotSize)
	}
	r := &ring{
		mem:     mem,
		written: (*atomic.Uint64)(unsafe.Pointer(&mem[offWritten])),
		read:    (*atomic.Uint64)(unsafe.Pointer(&mem[offRead])),
		revoked: (*atomic.Uint64)(unsafe.Pointer(&mem[offRevoked])),
		reach:   (*atomic.Uint64)(unsafe.Pointer(&mem[offReach])),
		entries: unsafe.Slice((*entry)(unsafe.Pointer(&mem[offEntries])), s.slots),
		data:    mem[hdr:],
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
// goes there: memory too short for them fails the transfer with an error
// instead of a store with SIGBUS (MADV_POPULATE_WRITE, Linux 5.14; older
// kernels answer EINVAL and keep the risk).
func (r *ring) populate() error {
	err := unix.Madvise(r.data, unix.MADV_POPULATE_WRITE)
	if err != nil && err != unix.EINVAL {
		r.broken = true
		return fmt.Errorf("lmt: cannot allocate the %d bytes of the fixed shm ring from rank %d to rank %d: %w", len(r.data), r.src, r.dst, err)
	}
	r.populated = true
	return nil
}
