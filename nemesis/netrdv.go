package nemesis

// The network rendezvous: a long message to a rank on another node crosses
// the network once, read by the receiver straight into its buffer, instead
// of in MaxPacket-sized packets copied out of the module's receive buffers.
// It is the LMT's protocol over the network (Buntinas, Mercier, Gropp,
// "Design and Evaluation of Nemesis", CCGRID 2006, §3.5: RTS, then the
// payload by the fastest one-sided means, then DONE), with the module's
// one-sided read (libfabric's fi_read of a registered region) as the
// backend:
//
//	sender                              receiver
//	Expose(buf) → handle
//	RTS (sequenced: cookie, handle) ──▶ matched like any message
//	                                    Read(handle) into the receive buffer
//	                         ◀── DONE (cookie, status)
//	Unexpose, send complete             receive complete once DONE left
//
// The RTS takes the message's place in the pair's sequence, so ordering,
// AnySource, Probe and truncation are those of every other message. A send
// waits for DONE; a receive completes when the module has reported both its
// read and its DONE, so that neither the buffer nor the request is reused
// while the module still holds them.

import (
	"encoding/binary"
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
// bytes stay the module's until the report); false means no room
// now (the endpoint tries again after a Poll). Each Read is reported once,
// through NetEventsReader.ReadDone with the same r, whether it succeeded or
// failed (a lost peer fails it).
type NetReader interface {
	Expose(dst int, buf []byte, h []byte) (n int, slot int32, err error)
	Unexpose(slot int32)
	Read(r *Request, src int, h []byte, dst [][]byte) (bool, error)
}

// NetEventsReader is what a NetReader's Poll reports besides NetEvents:
// the NetEvents a module's Poll receives implement it.
type NetEventsReader interface {
	ReadDone(r *Request, err error)
}

// NetHandleMax is the longest handle a NetReader may write.
const NetHandleMax = 64

// NetRendezvousMin is the shortest message sent by rendezvous to a rank on
// another node when the module can read; shorter ones go in packets, whose
// copies cost less than a registration and a round trip.
const NetRendezvousMin = 64 << 10

// Packet kinds of the network rendezvous. The RTS is sequenced like a
// message; DONE is not (it answers an RTS already matched).
const (
	kindNetRTS  = 19
	kindNetDone = 20
)

// rdvSend is a rendezvous send waiting for its DONE; its cookie is its
// index in netPath.rdv.
type rdvSend struct {
	req    *Request
	slot   int32 // the module's, for Unexpose
	packet [4 + NetHandleMax]byte
}

// rdvRead is a receive whose read found no room in the module yet.
type rdvRead struct {
	req    *Request
	handle [NetHandleMax]byte
	n      int
}

// netRendezvous says whether r goes to its remote peer by rendezvous.
func (ep *Endpoint) netRendezvous(r *Request) bool {
	_, ok := ep.net.mod.(NetReader)
	return ok && !r.seqd && !r.vec && r.msgLen >= NetRendezvousMin
}

// netSendRTS exposes r's buffer and sends its RTS.
func (ep *Endpoint) netSendRTS(r *Request) (sendResult, error) {
	n := ep.net
	cookie := n.freeRdv()
	s := &n.rdv[cookie]
	binary.LittleEndian.PutUint32(s.packet[:], uint32(cookie))
	hn, slot, err := n.mod.(NetReader).Expose(r.peer, r.buf[0], s.packet[4:])
	if err != nil {
		n.releaseRdv(cookie)
		return sendBlocked, fmt.Errorf("nemesis: exposing a %d-byte message to rank %d: %w", r.msgLen, r.peer, err)
	}
	p := &ep.peers[r.peer]
	putNetHdr(n.hdr[:], kindNetRTS, ep.rank, p.sendSeq, r.tag, 4+hn, r.msgLen)
	n.iov = append(n.iov[:0], s.packet[:4+hn])
	ok, err := n.mod.Send(r, r.peer, n.hdr[:], n.iov)
	if err != nil || !ok {
		n.mod.(NetReader).Unexpose(slot)
		n.releaseRdv(cookie)
		return sendBlocked, err
	}
	s.req, s.slot = r, slot
	p.sendSeq++
	r.seqd, r.rdv, r.netSlot = true, true, int32(cookie)
	r.sent = r.msgLen
	r.netOut++
	n.inflight++
	n.moved++
	return sendHanded, nil
}

// freeRdv returns the index of an idle rendezvous entry, growing the table
// when every one is taken; the entry is the caller's until it gives it
// back with releaseRdv, or Expose fails and it goes back at once.
func (n *netPath) freeRdv() int {
	if k := len(n.rdvFree); k > 0 {
		i := n.rdvFree[k-1]
		n.rdvFree = n.rdvFree[:k-1]
		return int(i)
	}
	n.rdv = append(n.rdv, rdvSend{})
	return len(n.rdv) - 1
}

func (n *netPath) releaseRdv(i int) {
	n.rdv[i].req = nil
	n.rdvFree = append(n.rdvFree, int32(i))
}

// startNetRead begins reading the message whose RTS matched receive r:
// min(r.msgLen, r.room) bytes; rts is the cookie then the handle.
func (ep *Endpoint) startNetRead(r *Request, rts []byte) error {
	if len(rts) < 4 || len(rts) > 4+NetHandleMax {
		return errorf(ErrCorrupt, "rendezvous request of %d bytes from rank %d", len(rts), r.peer)
	}
	r.rdv, r.netSlot = true, int32(binary.LittleEndian.Uint32(rts))
	w := rdvRead{req: r}
	w.n = copy(w.handle[:], rts[4:])
	n := ep.net
	if len(n.reads) == 0 && ep.issueRead(&w) {
		return nil
	}
	n.reads = append(n.reads, w)
	return nil
}

// issueRead hands w's read to the module; false when it has no room.
func (ep *Endpoint) issueRead(w *rdvRead) bool {
	r, n := w.req, ep.net
	want := min(r.msgLen, r.room)
	if want == 0 { // nothing fits: the sender only needs its DONE
		ep.netReadDone(r, nil)
		return true
	}
	n.iov = r.slice(n.iov[:0], 0, want)
	ok, err := n.mod.(NetReader).Read(r, r.peer, w.handle[:w.n], n.iov)
	if err != nil {
		ep.netReadDone(r, err)
		return true
	}
	if ok {
		r.netOut++
		n.inflight++
	}
	return ok
}

// retryReads issues the reads that found no room, in order.
func (ep *Endpoint) retryReads() {
	n := ep.net
	k := 0
	for k < len(n.reads) && ep.issueRead(&n.reads[k]) {
		k++
	}
	n.reads = n.reads[:copy(n.reads, n.reads[k:])]
}

// netReadDone ends receive r's read: it answers DONE (with r, so that r is
// the module's until the DONE is reported) and completes r once it left.
func (ep *Endpoint) netReadDone(r *Request, err error) {
	r.n = 0
	switch {
	case err == nil:
		r.n = min(r.msgLen, r.room)
	case ep.peers[r.peer].dead != nil:
		r.err = ep.peers[r.peer].dead // a *PeerError, naming the rank
	default:
		r.err = fmt.Errorf("nemesis: reading the %d-byte message of rank %d: %w", r.msgLen, r.peer, err)
	}
	n := ep.net
	status := 0
	if err != nil {
		status = 1
	}
	putNetHdr(n.hdr[:], kindNetDone, ep.rank, 0, int(r.netSlot), 0, status)
	ok, serr := n.mod.Send(r, r.peer, n.hdr[:], nil)
	if serr == nil && ok {
		r.netOut++
		n.inflight++
		return
	}
	// The sender learns nothing; it is gone (serr) or its DONE finds
	// no room, and will fail by its liveness probe if it never hears.
	ep.finishRdvRecv(r)
}

func (ep *Endpoint) finishRdvRecv(r *Request) {
	r.rdv = false
	if r.err != nil {
		ep.finish(r, r.n, r.err)
		return
	}
	ep.finishRecv(r)
}

// ReadDone implements NetEventsReader.
func (e *netEvents) ReadDone(r *Request, err error) {
	ep := (*Endpoint)(e)
	ep.net.inflight--
	if r.state != statePending || r.op != opRecv || !r.rdv || r.netOut == 0 {
		return
	}
	r.netOut--
	ep.netReadDone(r, err)
}

// rdvDone handles the DONE of the rendezvous send of cookie to src.
func (ep *Endpoint) rdvDone(src, cookie int, status uint64) error {
	n := ep.net
	if cookie < 0 || cookie >= len(n.rdv) || n.rdv[cookie].req == nil || n.rdv[cookie].req.peer != src {
		return ep.fail(errorf(ErrCorrupt, "rank %d ended rendezvous %d, which is not one of its", src, cookie))
	}
	s := &n.rdv[cookie]
	r := s.req
	var err error
	if status != 0 {
		err = errorf(ErrPeerDead, "rank %d could not read the %d-byte message", src, r.msgLen)
	}
	ep.endRdvSend(s, err)
	return nil
}

// endRdvSend releases the rendezvous send s and completes its request with
// err, or lets the report of its RTS do so.
func (ep *Endpoint) endRdvSend(s *rdvSend, err error) {
	r := s.req
	ep.net.mod.(NetReader).Unexpose(s.slot)
	ep.net.releaseRdv(int(r.netSlot))
	r.rdv = false
	if err != nil && r.err == nil {
		r.err = err
	}
	if r.netOut == 0 {
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

// failRdv fails the rendezvous that wait on rank: its sends' DONE will not
// come, and its receives' reads that found no room will not start. Reads
// in flight stay the module's until it reports them.
func (ep *Endpoint) failRdv(rank int, err error) {
	n := ep.net
	if n == nil {
		return
	}
	for i := range n.rdv {
		if s := &n.rdv[i]; s.req != nil && s.req.peer == rank {
			ep.endRdvSend(s, err)
		}
	}
	k := 0
	for _, w := range n.reads {
		if w.req.peer == rank {
			w.req.rdv = false
			ep.finish(w.req, 0, err)
			continue
		}
		n.reads[k] = w
		k++
	}
	n.reads = n.reads[:k]
}
