package shm

import (
	"fmt"

	"github.com/knemesis/knemesis/internal/fdpass"
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

type shm struct {
	env       *lmt.Env
	slots     uint64 // entries per ring: the most pieces in flight per pair
	slotSize  int
	poolSlots int
	own       *pool          // this rank's slots, for every ring it writes
	srv       *fdpass.Server // hands own to the receivers (pool.go)
	held      int            // slots of own claimed and not yet released
	busy      []*ring        // rings written with slots not yet released
	peers     []*pool        // by rank: senders' pools, mapped on first read
	out, in   []*ring        // by peer rank: rings we write, rings we read
	// railOut and railIn are the rings that carry the ring pieces of
	// Split messages (rail.go), apart from the stream's.
	railOut, railIn []*ring
}

func newShm(env *lmt.Env) (lmt.Backend, error) {
	c := env.Config
	switch {
	case c.ShmSlotSize%64 != 0:
		return nil, fmt.Errorf("shm slot size %d is not a multiple of 64", c.ShmSlotSize)
	case c.ShmSlots > maxGeom || c.ShmPoolSlots > maxGeom:
		return nil, fmt.Errorf("shm ring of %d entries with a pool of %d slots: both must be at most %d", c.ShmSlots, c.ShmPoolSlots, maxGeom)
	}
	own, err := newPool(env.Job, env.Rank, c.ShmPoolSlots, c.ShmSlotSize)
	if err != nil {
		return nil, err
	}
	srv, err := own.serve(env)
	if err != nil {
		own.close()
		return nil, err
	}
	return &shm{env: env, slots: uint64(c.ShmSlots), slotSize: c.ShmSlotSize, poolSlots: c.ShmPoolSlots, own: own, srv: srv,
		peers: make([]*pool, env.Size), out: make([]*ring, env.Size), in: make([]*ring, env.Size),
		railOut: make([]*ring, env.Size), railIn: make([]*ring, env.Size)}, nil
}

// maxGeom bounds ring entries and pool slots: the ring's geometry word
// holds each in 16 bits.
const maxGeom = 1<<16 - 1

// Buffered implements [lmt.Buffered]: the ring holds a copy.
func (s *shm) Buffered() bool { return true }

// Datatypes implements [lmt.Datatyped]: each side copies between the ring
// and its own buffers with GatherAt and ScatterAt, which walk a datatype
// description block by block, and the handle names nothing.
func (s *shm) Datatypes() bool { return true }

// Walks implements [lmt.Walker]: a block costs the ring one copy, so no
// block is staged.
func (s *shm) Walks() bool { return true }

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
		r, err := s.open(src, dst, streamRing)
		if err != nil {
			return err
		}
		*rp = r
	}
	if t.Side() == lmt.Receiver && (*rp).verdict == reachUnknown {
		s.judge(*rp) // before the CTS
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

// Prefill implements lmt.Early: the sender's first slots, before the CTS.
// It takes at most half the pool: what it fills stays claimed until the
// receiver matches the message, which may wait on messages this rank
// has yet to send, and those need slots.
func (s *shm) Prefill(t *lmt.Transfer, max int) (int, error) {
	r := s.out[t.Peer()]
	if r == nil {
		var err error
		if r, err = s.open(s.env.Rank, t.Peer(), streamRing); err != nil {
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
	return s.push(r, t, t, max, true)
}

// Kept implements lmt.Early.
func (s *shm) Kept(t *lmt.Transfer) bool {
	r := s.out[t.Peer()]
	if r == nil || r.revoked.Load() == t.ID() {
		return false
	}
	// A receiver that cannot map the pool skips what went there early;
	// it said so before its CTS.
	return r.blind != t.ID() || r.reach.Load() != reachRing
}

func (s *shm) Step(t *lmt.Transfer, max int) (int, error) {
	if t.Side() == lmt.Sender {
		return s.push(s.out[t.Peer()], t, t, max, false)
	}
	return s.pull(s.in[t.Peer()], t, t, max)
}

// mover is what push and pull copy between the ring and: a transfer at its
// cursor, or the ring piece of a Split one (rail.go).
type mover interface {
	GatherAt(dst []byte, skip int) int
	ScatterAt(src []byte, skip int) int
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
	r.corrupt = lmt.Corrupt(r.dst, "read counter of "+r.name(),
		"%d with %d written: not within the ring's %d slots behind it", rd, r.mine, s.slots)
	return r.corrupt
}

func (s *shm) pullCorrupt(r *ring, w uint64) error {
	r.corrupt = lmt.Corrupt(r.src, "written counter of "+r.name(),
		"%d with %d read: not within the ring's %d slots ahead of it", w, r.mine, s.slots)
	return r.corrupt
}

// push fills free ring entries with t's next pieces (from m), in slots of the pool
// (leaving reserve of them free) or, for a receiver in another PID
// namespace, in the ring's own. An empty pool is "not now": the receivers
// of the slots in flight give them back as they read.
func (s *shm) push(r *ring, t *lmt.Transfer, m mover, max int, early bool) (int, error) {
	w, rd := r.mine, r.read.Load()
	if w-rd > s.slots {
		return 0, s.pushCorrupt(r, rd)
	}
	s.reap(r, rd)
	n := 0
	if r.verdict == reachUnknown {
		r.verdict = r.reach.Load()
	}
	reserve := 0
	if early {
		reserve = s.poolSlots / 2
	}
	useRing := r.verdict == reachRing
	if useRing && !r.populated {
		if err := r.populate(); err != nil {
			return 0, err
		}
	}
	switch {
	case r.verdict == reachUnknown && !early:
		return 0, nil // the receiver judges before its CTS
	case r.verdict == reachUnknown:
		r.blind = t.ID()
	case early && r.verdict == reachRing && r.blind == t.ID():
		// Its early pieces in the pool are being skipped and it
		// starts over at its CTS (Kept): pieces in the ring now
		// would be read as its first bytes.
		return 0, nil
	}
	for i := uint64(0); i < s.slots && n < max && w-rd < s.slots; i++ {
		dst, loc, ok := s.placeFor(r, w, reserve, useRing)
		if !ok {
			break
		}
		c := m.GatherAt(dst, n)
		if c == 0 {
			s.unplace(loc)
			break
		}
		n += c
		e := &r.entries[w%s.slots]
		e.slot.Store(loc)
		r.held[w%s.slots] = -1 // the ring's own slot: nothing to release
		if loc&inRing == 0 {
			r.held[w%s.slots] = int32(loc)
		}
		if loc&inRing == 0 && !r.busy {
			r.busy = true
			s.busy = append(s.busy, r)
		}
		// Release stores: the next slot's copy starts while these
		// lines travel to the receiver's core (see internal/lineops).
		lineops.StoreRelease64(&e.owner, t.ID())
		w++
		r.mine = w
		lineops.StoreRelease64(r.written, w)
		if w-rd == s.slots {
			if rd = r.read.Load(); w-rd > s.slots {
				return 0, s.pushCorrupt(r, rd)
			}
			s.reap(r, rd) // held has room for the ring's entries only
		}
	}
	return n, nil
}

// pull copies the filled entries of t out of r into m. On a stream's ring
// it skips what is not t's; a rail's carries t's piece alone.
func (s *shm) pull(r *ring, t *lmt.Transfer, m mover, max int) (int, error) {
	rd, w := r.mine, r.written.Load()
	if w-rd > s.slots {
		return 0, s.pullCorrupt(r, w)
	}
	n := 0
	for i := uint64(0); i < s.slots && n < max && rd < w; i++ {
		e := &r.entries[rd%s.slots]
		if o := e.owner.Load(); o != t.PeerID() && r.rail {
			return n, s.ownerCorrupt(r, o, t.PeerID())
		} else if o != t.PeerID() {
			// Filled early for a message matched later, or left by a
			// truncated one: not ours.
			lineops.StoreRelease64(r.revoked, o)
		} else if slot := e.slot.Load(); slot&inRing == 0 && r.verdict == reachRing && !r.rail {
			// Filled early into a pool this side cannot map: the
			// sender starts over (Kept).
		} else {
			piece, err := s.piece(r, rd, slot)
			if err != nil {
				return n, err
			}
			c := m.ScatterAt(piece, n)
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

// piece returns the memory of ring entry rd, whose location word the
// sender wrote as slot: the ring's own slot, or one of the sender's pool.
func (s *shm) piece(r *ring, rd, slot uint64) ([]byte, error) {
	if slot&inRing != 0 {
		off := int(rd%s.slots) * s.slotSize
		return r.data[off : off+s.slotSize], nil
	}
	if slot >= uint64(s.poolSlots) {
		r.corrupt = lmt.Corrupt(r.src, "slot number of "+r.name(),
			"%d: the pool has %d slots", slot, s.poolSlots)
		return nil, r.corrupt
	}
	p, err := s.peerPool(r)
	if err != nil {
		return nil, err
	}
	return p.slots.Slot(int(slot)), nil
}

// judge gives the receiver's verdict on r's sender's pool: mapped (and
// kept for every ring from that sender), or out of reach.
func (s *shm) judge(r *ring) {
	r.verdict = reachRing
	if s.peers[r.src] != nil {
		r.verdict = reachPool
	} else if p, err := mapPeerPool(s.env, r.src, s.poolSlots, s.slotSize); err == nil {
		s.peers[r.src], r.verdict = p, reachPool
	}
	r.reach.Store(r.verdict)
}

// peerPool returns the pool of r's sender, which a piece placed there
// says the receiver mapped.
func (s *shm) peerPool(r *ring) (*pool, error) {
	if p := s.peers[r.src]; p != nil && r.verdict == reachPool {
		return p, nil
	}
	r.corrupt = lmt.Corrupt(r.src, "entry of "+r.name(),
		"a piece in the sender's pool, which this side told it is out of reach")
	return nil, r.corrupt
}

// breakOff marks r not to be used again and removes its name: nothing
// will map it any more, so a transfer that failed before the sender's
// Start (the receiver died before its CTS, say) leaves nothing in
// /dev/shm.
func (r *ring) breakOff() {
	r.broken = true
	if r.path != "" {
		unix.Unlink(r.path)
		r.path = ""
	}
}

func (s *shm) Abort(t *lmt.Transfer) {
	rp, _, _ := s.ringFor(t)
	r := *rp
	if r == nil {
		return
	}
	r.breakOff()
	if t.Side() == lmt.Sender && t.CheckPeer() != nil {
		// A dead receiver reads no more: its slots come back now.
		s.reclaim(r)
	}
}

func (s *shm) Close() error {
	for _, rings := range [][]*ring{s.out, s.in, s.railOut, s.railIn} {
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
	for i, p := range s.peers {
		if p != nil {
			p.close()
			s.peers[i] = nil
		}
	}
	s.busy = nil
	s.srv.Close()
	unix.Rmdir(jobDir(s.env)) // fails harmlessly while other ranks' files are in it
	s.own.close()
	return nil
}
