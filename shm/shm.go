package shm

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/lineops"
	"github.com/knemesis/knemesis/lmt"
	"golang.org/x/sys/unix"
)

func init() {
	lmt.Register(lmt.Shm, newShm, func(*lmt.Config, lmt.Peer) error { return checkShm() })
}

func (s *shm) Check(peer lmt.Peer) error { return checkShm() }

// checkShm: the rings live in /dev/shm, which some containers mount
// read-only or not at all.
func checkShm() error {
	if err := unix.Access("/dev/shm", unix.W_OK|unix.X_OK); err != nil {
		return &lmt.Unavailable{Backend: lmt.Shm, Peer: -1, Err: err, Reason: "/dev/shm is not writable: " + err.Error(),
			Fix: "mount a tmpfs on /dev/shm (docker: --shm-size)"}
	}
	return nil
}

// The ring header: counters each in their own 128-byte block (the
// adjacent-line prefetcher pairs lines), geometry, then the slots' owner
// words, rounded up to whole pages. Owner words are 128 bytes apart too:
// packed in one line, the sender's store of slot k+1's owner would steal the
// line from the receiver reading slot k's, one more transfer between the
// cores per slot on top of the counters'.
const (
	offWritten = 0
	offRead    = 128
	offRevoked = 256
	offGeom    = 384
	offOwners  = 512
	ownerPitch = 128
)

func ringHeaderSize(slots int) int { return (offOwners + ownerPitch*slots + 4095) &^ 4095 }

type ring struct {
	mem     []byte
	written *atomic.Uint64 // advanced by the sender
	read    *atomic.Uint64 // advanced by the receiver
	revoked *atomic.Uint64 // id of the last transfer whose slots were skipped
	owners  []ownerWord
	data    []byte
	path    string
	broken  bool
}

// ownerWord is a slot's owner id alone in its 128-byte block.
type ownerWord struct {
	atomic.Uint64
	_ [ownerPitch - 8]byte
}

type shm struct {
	env      *lmt.Env
	slots    uint64
	slotSize int
	out, in  []*ring // by peer rank: rings we write, rings we read
}

func newShm(env *lmt.Env) (lmt.Backend, error) {
	c := env.Config
	if c.ShmSlotSize%64 != 0 {
		return nil, fmt.Errorf("shm slot size %d is not a multiple of 64", c.ShmSlotSize)
	}
	return &shm{env: env, slots: uint64(c.ShmSlots), slotSize: c.ShmSlotSize,
		out: make([]*ring, env.Size), in: make([]*ring, env.Size)}, nil
}

// Buffered implements [lmt.Buffered]: the ring holds a copy.
func (s *shm) Buffered() bool { return true }

func (s *shm) Handle(t *lmt.Transfer, dst []byte) (int, error) { return 0, nil }
func (s *shm) SetPeerHandle(t *lmt.Transfer, h []byte) error   { return nil }

func (s *shm) ringFor(t *lmt.Transfer) (**ring, int, int) {
	if t.Side() == lmt.Sender {
		return &s.out[t.Peer()], s.env.Rank, t.Peer()
	}
	return &s.in[t.Peer()], t.Peer(), s.env.Rank
}

func (s *shm) Start(t *lmt.Transfer) error {
	rp, src, dst := s.ringFor(t)
	if *rp == nil {
		r, err := s.open(src, dst)
		if err != nil {
			return err
		}
		*rp = r
	}
	if t.Side() == lmt.Sender && (*rp).path != "" {
		// The receiver mapped the ring before its CTS: the name has
		// served, and a crash can no longer leave it behind.
		unix.Unlink((*rp).path)
		(*rp).path = ""
	}
	if (*rp).broken {
		return fmt.Errorf("lmt: shm ring from rank %d to rank %d was left inconsistent by an earlier failed transfer", src, dst)
	}
	return nil
}

// open maps the ring of the ordered pair, creating it if this side comes
// first; both sides ask for the same size, so the order does not matter.
func (s *shm) open(src, dst int) (*ring, error) {
	path := "/dev/shm/knemesis-" + s.env.Job + "-lmt-" + strconv.Itoa(src) + "-" + strconv.Itoa(dst)
	hdr := ringHeaderSize(int(s.slots))
	size := hdr + int(s.slots)*s.slotSize
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lmt: shm ring %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, fmt.Errorf("lmt: sizing shm ring %s to %d bytes: %w", path, size, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("lmt: mapping shm ring %s: %w", path, err)
	}
	geom := s.slots<<32 | uint64(s.slotSize)
	g := (*atomic.Uint64)(unsafe.Pointer(&mem[offGeom]))
	if !g.CompareAndSwap(0, geom) && g.Load() != geom {
		unix.Munmap(mem)
		return nil, fmt.Errorf("lmt: shm ring %s has %d slots of %d bytes, this rank wants %d of %d (lmt.Config differs between ranks)",
			path, g.Load()>>32, uint32(g.Load()), s.slots, s.slotSize)
	}
	return &ring{
		mem:     mem,
		written: (*atomic.Uint64)(unsafe.Pointer(&mem[offWritten])),
		read:    (*atomic.Uint64)(unsafe.Pointer(&mem[offRead])),
		revoked: (*atomic.Uint64)(unsafe.Pointer(&mem[offRevoked])),
		owners:  unsafe.Slice((*ownerWord)(unsafe.Pointer(&mem[offOwners])), s.slots),
		data:    mem[hdr:],
		path:    path,
	}, nil
}

// Prefill implements lmt.Early: the sender's first slots, before the CTS.
func (s *shm) Prefill(t *lmt.Transfer, max int) int {
	r := s.out[t.Peer()]
	if r == nil {
		var err error
		if r, err = s.open(s.env.Rank, t.Peer()); err != nil {
			return 0 // the CTS will bring Start, and its error
		}
		s.out[t.Peer()] = r
	}
	if r.broken {
		return 0
	}
	n, _ := s.push(r, t, max)
	return n
}

// Kept implements lmt.Early.
func (s *shm) Kept(t *lmt.Transfer) bool {
	r := s.out[t.Peer()]
	return r != nil && r.revoked.Load() != t.ID()
}

func (s *shm) Step(t *lmt.Transfer, max int) (int, error) {
	if t.Side() == lmt.Sender {
		return s.push(s.out[t.Peer()], t, max)
	}
	return s.pull(s.in[t.Peer()], t, max)
}

func (s *shm) push(r *ring, t *lmt.Transfer, max int) (int, error) {
	w, rd := r.written.Load(), r.read.Load()
	n := 0
	for n < max && w-rd < s.slots {
		off := int(w%s.slots) * s.slotSize
		c := t.GatherAt(r.data[off:off+s.slotSize], n)
		if c == 0 {
			break
		}
		n += c
		// Release stores: the next slot's copy starts while these
		// lines travel to the receiver's core (see internal/lineops).
		lineops.StoreRelease64(&r.owners[w%s.slots].Uint64, t.ID())
		w++
		lineops.StoreRelease64(r.written, w)
		if w-rd == s.slots {
			rd = r.read.Load()
		}
	}
	return n, nil
}

func (s *shm) pull(r *ring, t *lmt.Transfer, max int) (int, error) {
	rd, w := r.read.Load(), r.written.Load()
	n := 0
	for n < max && rd < w {
		if o := r.owners[rd%s.slots].Load(); o != t.PeerID() {
			// Filled early for a message matched later, or left by a
			// truncated one: not ours.
			lineops.StoreRelease64(r.revoked, o)
			rd++
			lineops.StoreRelease64(r.read, rd)
			if rd == w {
				w = r.written.Load()
			}
			continue
		}
		off := int(rd%s.slots) * s.slotSize
		c := t.ScatterAt(r.data[off:off+s.slotSize], n)
		if c == 0 {
			break
		}
		n += c
		rd++
		lineops.StoreRelease64(r.read, rd)
		if rd == w {
			w = r.written.Load()
		}
	}
	return n, nil
}

func (s *shm) Abort(t *lmt.Transfer) {
	rp, _, _ := s.ringFor(t)
	if *rp != nil {
		(*rp).broken = true
	}
}

func (s *shm) Close() error {
	for _, rings := range [][]*ring{s.out, s.in} {
		for i, r := range rings {
			if r != nil {
				unix.Munmap(r.mem)
				if r.path != "" {
					unix.Unlink(r.path) // the peer keeps its mapping
				}
				rings[i] = nil
			}
		}
	}
	return nil
}
