package nemesis

// The network path: ranks on other nodes are reached through a NetModule
// (Buntinas, Mercier, Gropp, "Design and Evaluation of Nemesis", CCGRID
// 2006, §2.2, §3.4-3.5), whose packets enter the very matching that cells
// and fastboxes feed (arrive, continueMsg).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/knemesis/knemesis/peerfault"
	"time"
)

// NetModule is a network module: the MPICH2-Nemesis interface (init,
// finalize, send, poll_send, poll_recv) for ranks on other nodes.
//
// Contract: Address is what the other ranks need to reach this one; Connect
// gets every rank's address in rank order (this rank's and its node's
// included, to be ignored or used as the module sees fit). Send hands one
// packet to rank dst without blocking: hdr (NetHeaderSize bytes, to be
// copied before Send returns) then the payload entries, which stay
// untouched until the module reports the packet through NetEvents.Sent with
// the same r; it returns false when it has no room now (the endpoint tries
// again after a Poll). Packets to one rank arrive in the order they were
// sent, each whole: a packet never exceeds MaxPacket payload bytes, so the
// module's receive buffers of that size never truncate. Poll reports, in
// one call, completed sends, arrived packets (in arrival order per source),
// and ranks the module found gone (NetEvents.PeerFailed), and never blocks.
// Close releases everything; sends not yet reported are abandoned. A module
// belongs to the goroutine that drives its endpoint.
type NetModule interface {
	Provider() string // what moves the packets, e.g. "ofi tcp;ofi_rxm"
	Address() []byte
	Connect(addrs [][]byte) error
	MaxPacket() int
	Send(r *Request, dst int, hdr []byte, payload [][]byte) (bool, error)
	Poll(ev NetEvents) error
	Close() error
}

// NetEvents is what a NetModule's Poll reports to the endpoint.
type NetEvents interface {
	// Arrived hands over one packet: header and payload, valid only
	// during the call.
	Arrived(hdr, payload []byte) error
	// Sent reports that the packet Send took for r has left (err nil)
	// or failed.
	Sent(r *Request, err error)
	// PeerFailed reports that rank can no longer be reached; err says
	// why, in the module's words.
	PeerFailed(rank int, err error)
}

// Net joins ranks on several nodes: those on this rank's node share the
// segment, the others are reached through Module. Join exchanges the
// module's addresses with Exchange, an all-gather the launcher provides
// (PMIx put, commit, fence and get under mpirun or srun). The endpoint owns
// the module once Join succeeds (Endpoint.Close closes it; so does Join
// when every rank turns out to be local); when Join fails, the caller
// still owns it.
type Net struct {
	Module   NetModule
	Nodes    []int                                         // node of every rank, in rank order
	Exchange func(addr []byte) (addrs [][]byte, err error) // every rank's address, in rank order
	// PeerTimeout: a remote rank from which nothing at all came (no
	// packet, no part of a read) for this long after a liveness probe
	// left for it is taken for lost (a provider may retry a connection
	// to a dead process for ever); DefaultNetPeerTimeout.
	PeerTimeout time.Duration
}

// DefaultNetPeerTimeout is Net.PeerTimeout's default.
const DefaultNetPeerTimeout = 10 * time.Second

// NetHeaderSize is the size of the header every network packet carries.
const NetHeaderSize = 32

// Packet kinds of the network path only: they carry no sequence number.
const (
	kindNetPing = 16 // liveness probe of a blocked call: asks for a pong
	kindNetPong = 17 // answer to a ping
	kindNetBye  = 18 // the sender closed its endpoint
)

var errNetBye = errors.New("it said goodbye")

// opPing marks the requests of pings and byes, which no caller waits for.
const opPing = opRecv + 1

// netPath is an endpoint's state for its remote peers.
type netPath struct {
	mod        NetModule
	maxPkt     int
	hdr        [NetHeaderSize]byte
	iov        [][]byte  // the entries of the packet being sent
	pings      []Request // per rank: the liveness probe in flight (or the goodbye)
	pongs      []Request // per rank: the answer to its probe in flight
	unanswered []int64   // per rank: when the first ping nothing from the rank answered yet left (ns), or 0
	timeout    time.Duration
	inflight   int    // packets handed to the module, not reported
	moved      uint64 // packets sent or received, for progressMark
	lastPoll   time.Time
	ctl        []*netCtl // packet slots of the LMT's RTSs and control packets (netrdv.go)
	ctlFree    []int32   // idle entries of ctl
	ctlSize    int       // bytes a slot holds: a cell's payload, within MaxPacket
	reader     NetReader // mod, when it reads remote memory (long messages go through the LMT); else nil
	lost       []netLoss // ranks a send found unreachable, for the next poll
	events     *netEvents
}

// netEvents is the endpoint as the module sees it.
type netEvents Endpoint

// netSetup checks o.Net and says which ranks share this rank's node.
func (o *Options) netSetup(rank, size int) (local []bool, node int, err error) {
	local = make([]bool, size)
	n := o.Net
	if n == nil {
		for i := range local {
			local[i] = true
		}
		return local, 0, nil
	}
	switch {
	case n.Module == nil:
		return nil, 0, errorf(ErrInvalidArg, "Options.Net without a Module")
	case n.Exchange == nil:
		return nil, 0, errorf(ErrInvalidArg, "Options.Net without an Exchange")
	case len(n.Nodes) != size:
		return nil, 0, errorf(ErrInvalidArg, "Options.Net.Nodes names %d nodes for a job of %d ranks", len(n.Nodes), size)
	case n.Module.MaxPacket() < 1:
		return nil, 0, errorf(ErrInvalidArg, "network module %s carries packets of %d bytes", n.Module.Provider(), n.Module.MaxPacket())
	}
	node = n.Nodes[rank]
	for i, nd := range n.Nodes {
		local[i] = nd == node
	}
	return local, node, nil
}

// firstLocal is the rank that creates the node's segment.
func firstLocal(local []bool) int {
	for i, ok := range local {
		if ok {
			return i
		}
	}
	return -1
}

// localRanks counts the ranks that share this rank's segment.
func (ep *Endpoint) localRanks() int {
	k := 0
	for i := range ep.peers {
		if !ep.peers[i].net {
			k++
		}
	}
	return k
}

// joinNet exchanges the module's addresses and connects the remote peers.
// With no remote peer the module is closed and the endpoint polls none.
func (ep *Endpoint) joinNet() error {
	n := ep.opts.Net
	addrs, err := n.Exchange(n.Module.Address())
	if err != nil {
		return fmt.Errorf("nemesis: exchanging network addresses: %w", err)
	}
	if len(addrs) != ep.size {
		return errorf(ErrInvalidArg, "address exchange returned %d addresses for %d ranks", len(addrs), ep.size)
	}
	if ep.localRanks() == ep.size {
		return n.Module.Close()
	}
	if err := n.Module.Connect(addrs); err != nil {
		return fmt.Errorf("nemesis: network module %s: %w", n.Module.Provider(), err)
	}
	ep.net = &netPath{mod: n.Module, maxPkt: n.Module.MaxPacket(), pings: make([]Request, ep.size),
		pongs: make([]Request, ep.size), unanswered: make([]int64, ep.size), timeout: n.PeerTimeout}
	if ep.net.timeout <= 0 {
		ep.net.timeout = DefaultNetPeerTimeout
	}
	ep.net.iov = make([][]byte, 0, 8)
	ep.net.ctlSize = min(ep.seg.payloadSize, ep.net.maxPkt)
	ep.net.reader, _ = n.Module.(NetReader)
	ep.net.events = (*netEvents)(ep)
	return nil
}

// NetModule returns the network module the endpoint reaches other nodes
// through, nil when every rank is on its node.
func (ep *Endpoint) NetModule() NetModule {
	if ep.net == nil {
		return nil
	}
	return ep.net.mod
}

// Remote reports whether rank is on another node: reached through the
// network module, its long messages through the LMT's net-read backend.
func (ep *Endpoint) Remote(rank int) bool {
	return rank >= 0 && rank < ep.size && ep.peers[rank].net
}

// Path says how this endpoint reaches rank: "self", "shm" or "net <provider>".
func (ep *Endpoint) Path(rank int) string {
	switch {
	case rank == ep.rank:
		return "self"
	case rank >= 0 && rank < ep.size && ep.peers[rank].net:
		return "net " + ep.net.mod.Provider()
	}
	return "shm"
}

func putNetHdr(h []byte, kind uint32, src int, seq uint32, tag, n, total int) {
	binary.LittleEndian.PutUint32(h[0:], kind)
	binary.LittleEndian.PutUint32(h[4:], uint32(src))
	binary.LittleEndian.PutUint32(h[8:], seq)
	binary.LittleEndian.PutUint32(h[12:], uint32(tag))
	binary.LittleEndian.PutUint32(h[16:], uint32(n))
	binary.LittleEndian.PutUint32(h[20:], 0)
	binary.LittleEndian.PutUint64(h[24:], uint64(total))
}

// netSend hands r's next packets to the module: an eager message in one
// packet, a longer one in packets of MaxPacket bytes (kindMsg then
// kindCont, as cells), its entries sliced, never copied; a message the LMT
// takes, as an RTS (netSendRTS): past the eager limit, when the module
// reads (the LMT's only backend for remote ranks reads). The request
// completes when the module has reported all its packets (netSent), or
// when the LMT completes it.
func (ep *Endpoint) netSend(r *Request) (sendResult, error) {
	n := ep.net
	p := &ep.peers[r.peer]
	if r.err != nil {
		return ep.netAbort(r, r.err)
	}
	if !r.seqd && n.reader != nil && (r.inLMT || r.msgLen > ep.eagerMax || r.msgLen > ep.chooseAbove && ep.chooser.ViaLMT(r.peer, r.msgLen)) {
		return ep.netSendRTS(r)
	}
	for {
		chunk := min(r.msgLen-r.sent, n.maxPkt)
		kind := uint32(kindCont)
		if !r.seqd {
			kind = kindMsg
		}
		putNetHdr(n.hdr[:], kind, ep.rank, p.sendSeq, r.tag, chunk, r.msgLen)
		n.iov = r.slice(n.iov[:0], r.sent, chunk)
		ok, err := n.mod.Send(r, r.peer, n.hdr[:], n.iov)
		if err != nil {
			return ep.netAbort(r, err)
		}
		if !ok {
			return sendBlocked, nil
		}
		p.sendSeq++
		r.seqd = true
		r.sent += chunk
		r.netOut++
		n.inflight++
		n.moved++
		if r.sent == r.msgLen {
			return sendHanded, nil
		}
	}
}

// netAbort stops sending r after err: at once when none of its packets is
// with the module, else when the last is reported.
func (ep *Endpoint) netAbort(r *Request, err error) (sendResult, error) {
	if r.netOut == 0 {
		return sendBlocked, err
	}
	r.sent, r.err = r.msgLen, err
	return sendHanded, nil // the last report finishes r
}

// slice appends to iov the entries holding bytes [off, off+n) of a send.
func (r *Request) slice(iov [][]byte, off, n int) [][]byte {
	list := r.iov
	if !r.vec {
		list = r.buf[:]
	}
	for _, b := range list {
		if n == 0 {
			break
		}
		if off >= len(b) {
			off -= len(b)
			continue
		}
		k := min(len(b)-off, n)
		iov = append(iov, b[off:off+k])
		off, n = 0, n-k
	}
	return iov
}

// netIdlePoll is how often a rank that awaits nothing from the network
// still polls the module, for unexpected packets and the provider's own
// progress (a peer's connection or rendezvous). A poll of an idle libfabric
// endpoint costs more than a fastbox message (BenchmarkPollIdle in
// netmod/ofi; figures: git log -S "### The network module" docs/performance.md), so
// an intranode exchange must not pay it at a rate its own polling sets:
// time, not the count of Polls, bounds what it costs a rank.
const netIdlePoll = 50 * time.Microsecond

// pollNet polls the module when something may come from it: packets or
// reads in flight, receives that a remote rank or any rank may satisfy
// (Poll calls it then at every call), and once per netIdlePoll for
// unexpected packets (Poll calls it every 64 calls, and the clock says).
func (ep *Endpoint) pollNet() error {
	n := ep.net
	if n.inflight|ep.wildcards|ep.netExpect == 0 && time.Since(n.lastPoll) < netIdlePoll {
		return nil
	}
	n.lastPoll = time.Now()
	if err := n.mod.Poll(n.events); err != nil {
		return err
	}
	if len(n.lost) > 0 {
		ep.reportLost()
	}
	return nil
}

// Arrived delivers one packet to the matching cells and fastboxes use.
func (e *netEvents) Arrived(hdr, payload []byte) error {
	ep := (*Endpoint)(e)
	if len(hdr) < NetHeaderSize {
		return ep.fail(errorf(ErrCorrupt, "network packet with a %d-byte header", len(hdr)))
	}
	kind := binary.LittleEndian.Uint32(hdr[0:])
	src := int(binary.LittleEndian.Uint32(hdr[4:]))
	seq := binary.LittleEndian.Uint32(hdr[8:])
	tag := int(int32(binary.LittleEndian.Uint32(hdr[12:])))
	n := int(binary.LittleEndian.Uint32(hdr[16:]))
	total := binary.LittleEndian.Uint64(hdr[24:])
	if src >= ep.size || !ep.peers[src].net {
		return ep.fail(errorf(ErrCorrupt, "network packet from rank %d (job of %d), not a rank on another node", src, ep.size))
	}
	p := &ep.peers[src]
	if p.dead != nil && p.distrusted() {
		return nil
	}
	if n != len(payload) {
		return ep.distrust(peerfault.Corrupt(src, "length of a network packet", "%d bytes, %d arrived", n, len(payload)))
	}
	ep.net.moved++
	ep.net.unanswered[src] = 0 // src lives: probeRemote
	switch kind {
	case kindNetPing:
		ep.sendBare(&ep.net.pongs[src], src, kindNetPong)
		return nil
	case kindNetPong:
		return nil
	case kindControl: // ordered by the module, not sequenced: an LMT's CTS or DONE
		return ep.netLMTControl(src, payload)
	case kindNetBye:
		// Everything src sent came before this: what has not arrived
		// never will.
		p.netClosed = true
		e.PeerFailed(src, errNetBye)
		return nil
	}
	if perr := ep.checkNet(src, kind, seq, n, total); perr != nil {
		return ep.distrust(perr)
	}
	p.recvSeq++
	var err error
	if kind == kindCont {
		err = ep.continueMsg(src, payload)
	} else {
		err = ep.arrive(src, tag, kind, int(total), payload)
	}
	if err != nil {
		return ep.fail(err)
	}
	return nil
}

// checkNet checks the fields of a sequenced network packet from src: n
// payload bytes of a total-byte message. A total reaches no allocation:
// an unexpected message's buffer grows as its packets arrive.
func (ep *Endpoint) checkNet(src int, kind, seq uint32, n int, total uint64) *peerfault.Error {
	p := &ep.peers[src]
	inMsg := p.asm.req != nil || p.asm.ux != nil
	switch {
	case seq != p.recvSeq:
		return peerfault.Corrupt(src, "sequence of a network packet", "%d, expected %d", seq, p.recvSeq)
	case kind == kindCont:
		return nil
	case kind != kindMsg && kind != kindRTS:
		return peerfault.Corrupt(src, "kind of a network packet", "%d, which no sequenced packet carries", kind)
	case total > uint64(maxInt):
		return peerfault.OutOfBounds(src, "total of a network packet", total, uint64(maxInt))
	case kind == kindMsg && uint64(n) > total:
		return peerfault.OutOfBounds(src, "length of a network packet", uint64(n), total)
	case inMsg:
		return peerfault.Corrupt(src, "kind of a network packet", "a new message (kind %d) before the end of the previous one", kind)
	}
	return nil
}

// Sent counts one of r's packets as gone; the last completes r.
func (e *netEvents) Sent(r *Request, err error) {
	ep := (*Endpoint)(e)
	ep.net.inflight--
	switch r.op {
	case opPing:
		r.state = stateDone
		if err != nil {
			e.PeerFailed(r.peer, err)
		}
		return
	case opControl:
		ep.ctlSent(r, err)
		return
	}
	if r.state != statePending || r.netOut == 0 {
		return
	}
	r.netOut--
	if err != nil && r.err == nil {
		r.err = err // netSend sends no more of r
	}
	if r.netOut == 0 && r.sent == r.msgLen {
		ep.netSendFinished(r)
	}
}

// netSendFinished completes send r, whose packets the module has all
// reported.
func (ep *Endpoint) netSendFinished(r *Request) {
	n := r.msgLen
	if r.err != nil {
		n = 0
	}
	ep.finish(r, n, r.err)
}

// netLMTControl hands an LMT control packet from src to the LMT.
func (ep *Endpoint) netLMTControl(src int, pkt []byte) error {
	if ep.lmt == nil {
		return ep.fail(errorf(ErrCorrupt, "LMT control packet from rank %d, and no LMT here", src))
	}
	if err := ep.lmt.HandleControl(src, pkt); err != nil {
		return ep.fail(err)
	}
	return nil
}

// PeerFailed fails what waits on rank, as the liveness check does for a
// local rank that died.
func (e *netEvents) PeerFailed(rank int, err error) {
	ep := (*Endpoint)(e)
	if rank < 0 || rank >= ep.size || !ep.peers[rank].net || ep.peers[rank].dead != nil {
		return
	}
	p := &ep.peers[rank]
	how := "lost"
	if p.netClosed {
		how = "closed its endpoint and left"
	}
	ep.failPeer(rank, peerfault.Dead(rank, 0, "on another node, "+how, err), !p.netClosed)
}

// probeRemote is a blocked call's liveness check of the ranks whose
// process it cannot see: it pings every remote rank with no ping in flight
// and fails one from which nothing came, not even the pong a ping asks
// for, for Net.PeerTimeout since the first unanswered ping. Anything from
// the rank answers (Arrived and ReadMoved clear unanswered): a rank busy
// sending is alive although its pong waits behind its data on the wire,
// as the pong to a receiver waits behind the bytes of the read it serves.
// A provider may also fail the ping's send at once (a reset connection);
// and a send completion alone proves nothing (tcp;ofi_rxm completes sends
// to a killed process that it never reports).
//
// The clock is read before the module is polled, so that what arrived
// while this rank was not running (an oversubscribed machine) answers
// before the check: a rank is failed only when a poll after the moment
// its silence reached Net.PeerTimeout found nothing from it.
func (ep *Endpoint) probeRemote() error {
	n := ep.net
	now := time.Now().UnixNano()
	if err := n.mod.Poll(n.events); err != nil {
		return err
	}
	for i := range ep.peers {
		p := &ep.peers[i]
		if !p.net || p.dead != nil || p.netClosed {
			continue
		}
		if since := n.unanswered[i]; since != 0 && now-since > int64(n.timeout) {
			n.events.PeerFailed(i, fmt.Errorf("no answer to liveness probes for %v (Net.PeerTimeout)", n.timeout))
			continue
		}
		if ep.sendBare(&n.pings[i], i, kindNetPing) && n.unanswered[i] == 0 {
			n.unanswered[i] = now
		}
	}
	return n.mod.Poll(n.events)
}

// sendBare sends a header-only packet of kind to dst with r, unless r is
// still in flight; it reports whether the packet left.
func (ep *Endpoint) sendBare(r *Request, dst int, kind uint32) bool {
	n := ep.net
	if r.state == statePending {
		return false
	}
	r.start(ep, opPing, dst, 0)
	putNetHdr(n.hdr[:], kind, ep.rank, 0, 0, 0, 0)
	ok, err := n.mod.Send(r, dst, n.hdr[:], nil)
	switch {
	case err != nil:
		r.state = stateDone
		n.events.PeerFailed(dst, err)
	case ok:
		n.inflight++
	default:
		r.state = stateDone
	}
	return ok && err == nil
}

// closeNet tells the remote ranks this one leaves (so that they take its
// silence for a normal exit), gives the packets a moment to leave, and
// closes the module.
func (ep *Endpoint) closeNet() {
	n := ep.net
	if n == nil {
		return
	}
	deadline := time.Now().Add(time.Second)
	for i := range ep.peers {
		p := &ep.peers[i]
		r := &n.pings[i]
		if !p.net || p.dead != nil {
			continue
		}
		for r.state == statePending && time.Now().Before(deadline) {
			_ = n.mod.Poll(n.events)
		}
		ep.sendBare(r, i, kindNetBye)
	}
	for n.inflight > 0 && time.Now().Before(deadline) {
		_ = n.mod.Poll(n.events)
	}
	_ = n.mod.Close()
}
