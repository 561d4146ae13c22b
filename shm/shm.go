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
	src     int // the sending rank
	dst     int // the receiving rank
	// mine is this side's own counter (written for the sender, read for
	// the receiver), kept here: what the peer may overwrite in the
	// mapping is only ever read for the peer's counter, and checked.
	mine   uint64
	broken bool
	// corrupt is the error of a peer's counter out of bounds: the ring
	// is unusable from then on.
	corrupt error
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
	if (*rp).corrupt != nil {
		return (*rp).corrupt
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
	r := &ring{
		mem:     mem,
		written: (*atomic.Uint64)(unsafe.Pointer(&mem[offWritten])),
		read:    (*atomic.Uint64)(unsafe.Pointer(&mem[offRead])),
		revoked: (*atomic.Uint64)(unsafe.Pointer(&mem[offRevoked])),
		owners:  unsafe.Slice((*ownerWord)(unsafe.Pointer(&mem[offOwners])), s.slots),
		data:    mem[hdr:],
		path:    path,
		src:     src,
		dst:     dst,
	}
	// Only this side advances its counter, which a new ring holds at 0;
	// the peer's is checked against it on every read.
	if src == s.env.Rank {
		r.mine = r.written.Load()
	} else {
		r.mine = r.read.Load()
	}
	return r, nil
}

// Prefill implements lmt.Early: the sender's first slots, before the CTS.
func (s *shm) Prefill(t *lmt.Transfer, max int) (int, error) {
	r := s.out[t.Peer()]
	if r == nil {
		var err error
		if r, err = s.open(s.env.Rank, t.Peer()); err != nil {
			return 0, nil // the CTS will bring Start, and its error
		}
		s.out[t.Peer()] = r
	}
	if r.corrupt != nil {
		return 0, r.corrupt
	}
	if r.broken {
		return 0, nil
	}
	return s.push(r, t, max)
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

// The counters run on and never wrap in practice (2^64 slots), so the
// sender is at most the ring's size ahead of the receiver: written - read
// is in [0, slots] as unsigned numbers. A counter the peer wrote that
// breaks this (the peer is broken, or the mapping was overwritten) fails
// the transfer at once, naming the peer, instead of sending the receiver
// through 2^64 slots or holding the sender back for ever; and the loops
// below look at most at slots slots per Step whatever the counters say.

// pushCorrupt and pullCorrupt record and return the error of a peer's
// counter out of bounds.
func (s *shm) pushCorrupt(r *ring, rd uint64) error {
	r.corrupt = lmt.Corrupt(r.dst, fmt.Sprintf("read counter of the shm ring from rank %d to rank %d", r.src, r.dst),
		"%d with %d written: not within the ring's %d slots behind it", rd, r.mine, s.slots)
	return r.corrupt
}

func (s *shm) pullCorrupt(r *ring, w uint64) error {
	r.corrupt = lmt.Corrupt(r.src, fmt.Sprintf("written counter of the shm ring from rank %d to rank %d", r.src, r.dst),
		"%d with %d read: not within the ring's %d slots ahead of it", w, r.mine, s.slots)
	return r.corrupt
}

func (s *shm) push(r *ring, t *lmt.Transfer, max int) (int, error) {
	w, rd := r.mine, r.read.Load()
	if w-rd > s.slots {
		return 0, s.pushCorrupt(r, rd)
	}
	n := 0
	for i := uint64(0); i < s.slots && n < max && w-rd < s.slots; i++ {
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
		r.mine = w
		lineops.StoreRelease64(r.written, w)
		if w-rd == s.slots {
			if rd = r.read.Load(); w-rd > s.slots {
				return 0, s.pushCorrupt(r, rd)
			}
		}
	}
	return n, nil
}

func (s *shm) pull(r *ring, t *lmt.Transfer, max int) (int, error) {
	rd, w := r.mine, r.written.Load()
	if w-rd > s.slots {
		return 0, s.pullCorrupt(r, w)
	}
	n := 0
	for i := uint64(0); i < s.slots && n < max && rd < w; i++ {
		if o := r.owners[rd%s.slots].Load(); o != t.PeerID() {
			// Filled early for a message matched later, or left by a
			// truncated one: not ours.
			lineops.StoreRelease64(r.revoked, o)
		} else {
			off := int(rd%s.slots) * s.slotSize
			c := t.ScatterAt(r.data[off:off+s.slotSize], n)
			if c == 0 {
				break
			}
			n += c
		}
		rd++
		r.mine = rd
		lineops.StoreRelease64(r.read, rd)
		if rd == w {
			if w = r.written.Load(); w-rd > s.slots {
				return 0, s.pullCorrupt(r, w)
			}
		}
	}
	return n, nil
}

func (s *shm) Abort(t *lmt.Transfer) {
	rp, _, _ := s.ringFor(t)
	if r := *rp; r != nil {
		r.broken = true
		if r.path != "" {
			// Nothing will map it any more: a transfer that failed
			// before the sender's Start (the receiver died before its
			// CTS, say) leaves nothing in /dev/shm.
			unix.Unlink(r.path)
			r.path = ""
		}
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
