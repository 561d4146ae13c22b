package nemesis

// Long messages to ranks on other nodes take the one rendezvous every long
// message takes: the LMT's (Buntinas, Mercier, Gropp, "Design and
// Evaluation of Nemesis", CCGRID 2006, §3.5: RTS, then the payload by the
// fastest one-sided means, then DONE). Its backend for remote ranks,
// net-read (package netmod/netread), moves the payload with the network
// module's one-sided read, libfabric's fi_read of a registered region:
//
//	sender                              receiver
//	LMT StartSend: ExposeNet(buf) → key
//	RTS (kindRTS, sequenced) ─────────▶ matched like any message
//	                                    LMT StartRecv, Step: ReadNet(key)
//	                         ◀── DONE (kindControl)
//	UnexposeNet, send complete          receive complete
//
// This file is the glue the LMT needs on the network path: the module's
// reads, reached through the endpoint so that it polls the module while
// they are in flight and reports them, and the LMT's RTS and control
// packets carried by the module, copied into packet slots of the endpoint
// that the module holds until it reports them. The RTS takes the
// message's place in the pair's sequence, so ordering, AnySource, Probe
// and truncation are those of every other message.

import (
	"fmt"
)

// NetReader is a NetModule that moves long messages by one-sided reads.
//
// Contract: Expose registers buf for reads by rank dst and writes the
// handle a peer needs into h (at most NetHandleMax bytes), returning its
// length and the module's slot for Unexpose; buf stays untouched by the
// endpoint until Unexpose. Read starts reading the bytes of the region that
// handle h names (exposed by rank src) into dst's entries, end to end, from
// the region's start; h and dst's list are read before Read returns (dst's
// bytes stay the module's until the report); false means no room now (the
// caller tries again after a Poll). Each Read is reported once, through
// NetEventsReader.ReadDone with the same rd, whether it succeeded or failed
// (a lost peer fails it).
type NetReader interface {
	Expose(dst int, buf []byte, h []byte) (n int, slot int32, err error)
	Unexpose(slot int32)
	Read(rd *NetRead, src int, h []byte, dst [][]byte) (bool, error)
}

// NetEventsReader is what a NetReader's Poll reports besides NetEvents:
// the NetEvents a module's Poll receives implement it. ReadMoved reports
// that bytes of a read from rank src landed (a part of it, or all):
// src's process lives, since its provider served them, though what it
// sent since waits behind the rest of the read. A module reads a long
// region in parts so that this comes regularly: the liveness check
// (Net.PeerTimeout) counts it as hearing from src.
type NetEventsReader interface {
	ReadDone(rd *NetRead, err error)
	ReadMoved(src int)
}

// NetHandleMax is the longest handle a NetReader may write.
const NetHandleMax = 64

// NetRead follows the reads a caller of [Endpoint.ReadNet] started with
// it: the module holds it (and the destination buffers) until it reports
// every one. Its zero value is ready; it may be reused once not Busy.
type NetRead struct {
	left int32 // reads started, not yet reported
	err  error // the first that failed
}

// Busy reports whether a read started with rd is still the module's.
func (rd *NetRead) Busy() bool { return rd.left > 0 }

// Err returns the first failure among rd's reads: a *PeerError naming the
// rank when it was lost.
func (rd *NetRead) Err() error { return rd.err }

// reader returns the module's reads, or an error saying why there are none
// with rank.
func (ep *Endpoint) reader(rank int) (NetReader, error) {
	if rank < 0 || rank >= ep.size || !ep.peers[rank].net {
		return nil, errorf(ErrInvalidArg, "rank %d is not on another node: one-sided network reads reach remote ranks only", rank)
	}
	if m := ep.net.reader; m != nil {
		return m, nil
	}
	return nil, errorf(ErrNotSupported, "network module %s has no one-sided reads", ep.net.mod.Provider())
}

// NetReads reports whether the endpoint reaches rank, on another node,
// through a module that reads remote memory (the LMT's net-read backend
// needs one).
func (ep *Endpoint) NetReads(rank int) bool {
	_, err := ep.reader(rank)
	return err == nil
}

// ExposeNet registers buf for reads by rank dst, on another node, and
// writes the handle dst needs into h (NetHandleMax bytes suffice). It
// returns the handle's length and the slot to give UnexposeNet, after
// which buf is the caller's again.
func (ep *Endpoint) ExposeNet(dst int, buf, h []byte) (int, int32, error) {
	m, err := ep.reader(dst)
	if err != nil {
		return 0, 0, err
	}
	n, slot, err := m.Expose(dst, buf, h)
	if err != nil {
		return 0, 0, fmt.Errorf("nemesis: exposing %d bytes to rank %d: %w", len(buf), dst, err)
	}
	if n < 0 || n > len(h) || n > NetHandleMax {
		m.Unexpose(slot)
		return 0, 0, fmt.Errorf("nemesis: network module %s wrote a %d-byte handle into %d bytes", ep.net.mod.Provider(), n, len(h))
	}
	return n, slot, nil
}

// UnexposeNet ends the registration ExposeNet made. Reads of it still in
// flight fail at their reader.
func (ep *Endpoint) UnexposeNet(slot int32) { ep.net.reader.Unexpose(slot) }

// ReadNet starts reading, from rank src on another node, the region that
// handle h names into dst's entries, end to end from the region's start,
// and counts the read in rd; false when the module has no room now (try
// again after a Poll). Poll reports it (rd.Busy turns false once every
// read of rd is reported); until then dst is the module's.
func (ep *Endpoint) ReadNet(rd *NetRead, src int, h []byte, dst [][]byte) (bool, error) {
	m, err := ep.reader(src)
	if err != nil {
		return false, err
	}
	if err := ep.peers[src].dead; err != nil {
		return false, err
	}
	ok, err := m.Read(rd, src, h, dst)
	if err != nil {
		return false, fmt.Errorf("nemesis: reading from rank %d: %w", src, err)
	}
	if ok {
		rd.left++
		ep.net.inflight++
	}
	return ok, nil
}

// ReadDone implements NetEventsReader: the failure of a read from a rank
// found gone is that rank's *PeerError.
func (e *netEvents) ReadDone(rd *NetRead, err error) {
	ep := (*Endpoint)(e)
	ep.net.inflight--
	ep.net.moved++
	if rd.left <= 0 {
		return // not one of ReadNet's: nothing to count
	}
	rd.left--
	if err != nil && rd.err == nil {
		rd.err = err
	}
}

// ReadMoved implements NetEventsReader.
func (e *netEvents) ReadMoved(src int) {
	ep := (*Endpoint)(e)
	if src >= 0 && src < ep.size && ep.peers[src].net {
		ep.net.unanswered[src] = 0 // src lives: probeRemote
	}
}

// The LMT's packets to a remote rank: its RTS, which the LMT writes once
// and the endpoint sends when the module has room, and its control
// packets (CTS, DONE). Each is copied into a netCtl that the module
// holds until it reports the packet; slots are kept for the next one.

// netCtl is one packet slot; req is what the module reports it with.
type netCtl struct {
	req Request
	buf []byte
	len int
	idx int32 // in netPath.ctl
}

// opControl marks the requests of netCtl slots.
const opControl = opPing + 1

// takeCtl returns an idle packet slot, a new one when all are taken.
func (n *netPath) takeCtl() *netCtl {
	if k := len(n.ctlFree); k > 0 {
		c := n.ctl[n.ctlFree[k-1]]
		n.ctlFree = n.ctlFree[:k-1]
		return c
	}
	c := &netCtl{buf: make([]byte, n.ctlSize), idx: int32(len(n.ctl))}
	n.ctl = append(n.ctl, c)
	return c
}

func (n *netPath) releaseCtl(c *netCtl) { n.ctlFree = append(n.ctlFree, c.idx) }

// sendCtl hands slot c's packet of kind to rank dst; false when the module
// has no room now.
func (ep *Endpoint) sendCtl(c *netCtl, dst int, kind, seq uint32, tag, total int) (bool, error) {
	n := ep.net
	c.req.start(ep, opControl, dst, 0)
	c.req.netSlot = c.idx
	putNetHdr(n.hdr[:], kind, ep.rank, seq, tag, c.len, total)
	n.iov = append(n.iov[:0], c.buf[:c.len])
	ok, err := n.mod.Send(&c.req, dst, n.hdr[:], n.iov)
	if err != nil || !ok {
		c.req.state = stateDone
		return false, err
	}
	n.inflight++
	n.moved++
	return true, nil
}

// netSendRTS hands long send r to the LMT, whose RTS it sends in r's place
// in the pair's sequence. An RTS the module has no room for stays in its
// slot (r.netSlot) until the send is tried again.
func (ep *Endpoint) netSendRTS(r *Request) (sendResult, error) {
	n := ep.net
	if !r.inLMT {
		c := n.takeCtl()
		k, err := ep.startLMTSend(r, c.buf)
		if err != nil {
			n.releaseCtl(c)
			return sendBlocked, err
		}
		c.len, r.netSlot = k, c.idx
	}
	c := n.ctl[r.netSlot]
	p := &ep.peers[r.peer]
	ok, err := ep.sendCtl(c, r.peer, kindRTS, p.sendSeq, r.tag, r.msgLen)
	switch {
	case err != nil:
		// The LMT holds r: it fails it when the rank is found gone,
		// which a module that cannot send to it says.
		n.releaseCtl(c)
		n.lost = append(n.lost, netLoss{r.peer, err})
	case !ok:
		return sendBlocked, nil
	}
	p.sendSeq++
	r.seqd = true
	ep.stats.RTS++
	return sendHanded, nil
}

// netLoss is a rank the module could not send to, to report at the next
// poll: the send path that found it cannot fail the rank's requests
// under its own feet.
type netLoss struct {
	rank int
	err  error
}

// netControl sends an LMT control packet to rank dst on another node,
// behind the sends to dst still waiting for the module (an RTS among them).
func (ep *Endpoint) netControl(dst int, pkt []byte) (bool, error) {
	n := ep.net
	if len(pkt) > n.ctlSize {
		return false, errorf(ErrInvalidArg, "LMT packet of %d bytes exceeds the %d a network packet to rank %d carries", len(pkt), n.ctlSize, dst)
	}
	if err := ep.peers[dst].dead; err != nil {
		return false, err
	}
	if !ep.sendq[dst].Empty() {
		return false, nil
	}
	c := n.takeCtl()
	c.len = copy(c.buf, pkt)
	ok, err := ep.sendCtl(c, dst, kindControl, 0, 0, c.len)
	if !ok {
		n.releaseCtl(c)
	}
	return ok, err
}

// ctlSent takes the report of slot packet r.
func (ep *Endpoint) ctlSent(r *Request, err error) {
	r.state = stateDone
	ep.net.releaseCtl(ep.net.ctl[r.netSlot])
	if err != nil {
		(*netEvents)(ep).PeerFailed(r.peer, err)
	}
}

// dropNetRTS takes out of rank's window the LMT sends whose RTS never
// left, and gives their slots back: the LMT, told the rank is gone,
// completes them.
func (ep *Endpoint) dropNetRTS(rank int) {
	if ep.net == nil || !ep.peers[rank].net {
		return
	}
	q := &ep.sendq[rank]
	for r := q.Front(); r != nil; {
		next := r.links.Next()
		if r.inLMT && !r.seqd {
			ep.unsentRTS(r)
		}
		r = next
	}
}

// unsentRTS takes LMT send r, whose RTS waits in its slot for the module,
// out of its window and gives the slot back (once: r.netSlot becomes -1),
// when its rank is lost or the LMT completes it first (its engine
// closed).
func (ep *Endpoint) unsentRTS(r *Request) {
	if ep.net == nil || !ep.peers[r.peer].net || r.netSlot < 0 {
		return
	}
	ep.sendq[r.peer].Remove(&r.links)
	ep.sendsOut--
	ep.net.releaseCtl(ep.net.ctl[r.netSlot])
	r.netSlot = -1
}

// reportLost fails the ranks the send path found unreachable.
func (ep *Endpoint) reportLost() {
	n := ep.net
	for len(n.lost) > 0 {
		l := n.lost[0]
		n.lost = n.lost[1:]
		n.events.PeerFailed(l.rank, l.err)
	}
	n.lost = nil
}
