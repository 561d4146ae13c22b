//go:build ofi

package ofinet

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/netmod/ofi"
)

// Defaults of Config. DefaultPacket keeps a packet within tcp;ofi_rxm's
// eager protocol (see docs/netmod.md: its rendezvous crashed libfabric
// 1.17 when a peer was killed mid-transfer).
const (
	DefaultPacket   = 8 << 10
	DefaultReceives = 64
	// packetTag is libfabric's tag of every nemesis packet: the user's
	// tag travels in the header, matching is the endpoint's.
	packetTag = 0x6b6e
)

// Config chooses the provider and sizes the module.
type Config struct {
	ofi.Config     // Provider and Node required; HeaderSize is set here
	Packet     int // payload bytes a packet carries at most; DefaultPacket
	Receives   int // receives kept posted; DefaultReceives
	// JobKey is the job's secret, the same on every rank, that packets
	// are signed with (admit.go); the zero key means the one the
	// launcher put in jobkey.Env. Join sets it from PMIx.
	JobKey jobkey.Key
}

// Module is a nemesis.NetModule over one libfabric endpoint.
type Module struct {
	e         *ofi.Endpoint
	in        ofi.Inbox
	g         *guard
	hdr       [headerSize]byte // the packet being sent: nemesis's header, then its MAC
	cfg       Config
	sends     []send
	free      []int32 // idle entries of sends
	busy      []int32 // entries of sends in flight, oldest first
	addrs     []ofi.Addr
	ev        nemesis.NetEvents // during Poll
	deliver   func(src ofi.Addr, tag uint64, hdr, payload []byte) error
	regions   []*ofi.Region // exposed for reads (read.go), by slot
	regFree   []int32
	jobFree   []*readJob
	exposures uint64
	// captured, when set (by tests), sees every packet handed to the
	// provider: what a process that sniffs the wire would see.
	captured func(dst int, hdr []byte, payload [][]byte)
}

type send struct {
	req  ofi.Request
	nreq *nemesis.Request
	job  *readJob // a read's, instead of nreq (read.go)
	dst  int
	buf  []byte    // bounce buffer, when the payload has too many entries
	one  [1][]byte // the packed payload as a list
}

// Open starts the module: a provider that cannot start fails with the
// *ofi.StartError that says which provider and what fi_getinfo said.
func Open(cfg Config) (*Module, error) {
	if cfg.Packet == 0 {
		cfg.Packet = DefaultPacket
	}
	if cfg.Receives == 0 {
		cfg.Receives = DefaultReceives
	}
	if cfg.Slots == 0 {
		cfg.Slots = ofi.DefaultSlots
	}
	if cfg.Packet < 1 || cfg.Receives < 1 || cfg.Slots <= cfg.Receives {
		return nil, fmt.Errorf("%w: ofinet: Packet %d, Receives %d, Slots %d: want positive sizes and more slots than receives",
			ofi.ErrInvalidArg, cfg.Packet, cfg.Receives, cfg.Slots)
	}
	cfg.HeaderSize = headerSize
	cfg.Sources = true // admit.go checks them
	e, err := ofi.Open(cfg.Config)
	if err != nil {
		return nil, err
	}
	g, err := newGuard(cfg.JobKey)
	if err != nil {
		e.Close()
		return nil, err
	}
	cfg.JobKey = jobkey.Key{} // the guard keeps what it needs
	g.sources = e.Sources()
	m := &Module{e: e, g: g, cfg: cfg, sends: make([]send, cfg.Slots-cfg.Receives)}
	for i := range m.sends {
		m.free = append(m.free, int32(i))
	}
	m.busy = make([]int32, 0, len(m.sends))
	m.deliver = m.admit
	// Every tag matches: a message of another tag, which no one here
	// would ever receive, is dropped rather than left to pile up in the
	// provider's unexpected queue.
	if err := m.in.Open(e, cfg.Receives, cfg.Packet, packetTag, ^uint64(0)); err != nil {
		e.Close()
		return nil, err
	}
	return m, nil
}

// Provider names the libfabric provider, as fi_getinfo gave it.
func (m *Module) Provider() string { return "ofi " + m.e.Provider() }

// Address is what to publish: the endpoint's libfabric address, then the
// module's session (admit.go).
func (m *Module) Address() []byte { return append(m.e.Name(), m.g.session[:]...) }

// MaxPacket is the payload of the largest packet: the receives' buffers.
func (m *Module) MaxPacket() int { return m.cfg.Packet }

// Connect inserts every rank's address in rank order, so that rank r is
// the address vector's Addr(r), and learns their sessions.
func (m *Module) Connect(addrs [][]byte) error {
	names, err := m.g.connect(m.Address(), addrs)
	if err != nil {
		return err
	}
	m.addrs = make([]ofi.Addr, len(names))
	for r, a := range names {
		ad, err := m.e.Insert(a, fmt.Sprintf("rank %d", r))
		if err != nil {
			return fmt.Errorf("ofinet: address of rank %d: %w", r, err)
		}
		m.addrs[r] = ad
		m.g.inserted(r, ad)
	}
	return nil
}

// Refused counts the packets dropped because they did not prove that
// they come from the job (admit.go).
func (m *Module) Refused() Refused { return m.g.refused }

// admit hands a received packet to nemesis if it comes from the job.
func (m *Module) admit(src ofi.Addr, tag uint64, hdr, payload []byte) error {
	if _, ok := m.g.admit(src, tag, hdr, payload); !ok {
		return nil
	}
	return m.ev.Arrived(hdr[:nemesis.NetHeaderSize], payload)
}

// Send posts one packet; false when every send slot is in flight.
func (m *Module) Send(r *nemesis.Request, dst int, hdr []byte, payload [][]byte) (bool, error) {
	if len(m.free) == 0 {
		return false, nil
	}
	i := m.free[len(m.free)-1]
	s := &m.sends[i]
	if len(payload) > m.e.MaxPayloadIov() {
		payload = s.pack(payload, m.cfg.Packet)
	}
	copy(m.hdr[:], hdr)
	m.g.sign(dst, m.hdr[:], payload)
	err := m.e.Isend(&s.req, m.addrs[dst], packetTag, m.hdr[:], payload)
	if errors.Is(err, ofi.ErrNoSlot) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m.g.sent(dst)
	if m.captured != nil {
		m.captured(dst, m.hdr[:], payload)
	}
	m.free = m.free[:len(m.free)-1]
	s.nreq, s.dst = r, dst
	m.busy = append(m.busy, i)
	return true, nil
}

// pack copies payload into the send's bounce buffer: one entry.
func (s *send) pack(payload [][]byte, size int) [][]byte {
	if s.buf == nil {
		s.buf = make([]byte, size)
	}
	n := 0
	for _, b := range payload {
		n += copy(s.buf[n:], b)
	}
	s.one[0] = s.buf[:n]
	return s.one[:]
}

// Poll reads a batch of completions, reports the sends that completed and
// hands every arrived packet over, in matching order.
func (m *Module) Poll(ev nemesis.NetEvents) error {
	if _, err := m.e.Poll(); err != nil {
		return err
	}
	m.ev = ev
	for k := 0; k < len(m.busy); {
		i := m.busy[k]
		s := &m.sends[i]
		if !s.req.Done() {
			k++
			continue
		}
		m.busy = append(m.busy[:k], m.busy[k+1:]...)
		m.free = append(m.free, i)
		r, j, err := s.nreq, s.job, s.req.Err()
		s.nreq, s.job = nil, nil
		lost := errors.Is(err, ofi.ErrPeerLost)
		if j != nil {
			if lost { // first, so that the read fails naming the rank
				ev.PeerFailed(s.dst, err)
			}
			if err == nil { // the source served it: it lives (nemesis.Net.PeerTimeout)
				ev.(nemesis.NetEventsReader).ReadMoved(s.dst)
			}
			m.readDone(ev, j, err)
			continue
		}
		ev.Sent(r, err)
		if lost {
			ev.PeerFailed(s.dst, err)
		}
	}
	err := m.drain()
	m.ev = nil
	return err
}

// drain hands the arrived packets over. A receive that failed (a peer's
// connection broke: tcp;ofi_rxm fails a receive posted from any peer) is
// posted again by Drain and is no fault of this endpoint's: which rank is
// gone, nemesis's liveness probes find out.
func (m *Module) drain() error {
	for {
		_, err := m.in.Drain(m.deliver)
		if err == nil || !failedReceive(err) {
			return err
		}
		if errors.Is(err, ofi.ErrTruncated) {
			m.g.refused.Oversize++
		}
	}
}

func failedReceive(err error) bool {
	var pe *ofi.PeerError
	return errors.As(err, &pe) && pe.Op == "receive"
}

// Close cancels the receives and closes the endpoint.
func (m *Module) Close() error {
	m.in.Close()
	return m.e.Close()
}

var _ nemesis.NetModule = (*Module)(nil)
