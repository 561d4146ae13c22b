package nemesis

import (
	"unsafe"

	"github.com/knemesis/knemesis/peerfault"

	"github.com/knemesis/knemesis/internal/lineops"
	"github.com/knemesis/knemesis/internal/memcopy"
	"github.com/knemesis/knemesis/nemesis/internal/ilist"
)

// maxCellsPerPoll bounds the work of one Poll so that sends, fastboxes and
// the LMT get their turn while a peer floods the receive queue.
const maxCellsPerPoll = 64

// Poll advances everything once: queued sends, the fastboxes of expected
// sources (those of every source attached here every 64 calls, and the
// ones a wildcard receive must see at every call: see fastbox.go), the
// receive queue, and the LMT. It never blocks and
// allocates nothing unless a message arrives before its receive is posted.
func (ep *Endpoint) Poll() error {
	if ep.fatal != nil {
		return ep.fatal
	}
	ep.polls++
	ep.pollMatched = ep.matched
	if ep.sendsOut > 0 {
		if err := ep.progressSends(); err != nil {
			return err
		}
	}
	if ep.arenaOut.busy != 0 {
		ep.pollArenaSends()
	}
	if ep.seg.fboxPayload > 0 {
		for i := 0; i < len(ep.expected); {
			src := int(ep.expected[i])
			if ep.peers[src].expectN == 0 {
				ep.unexpect(i) // swaps the last one in: look at i again
				continue
			}
			if err := ep.pollFboxes(src); err != nil {
				return err
			}
			i++
		}
		if ep.wildcards > 0 {
			if err := ep.pollWildcard(); err != nil {
				return err
			}
		}
		if ep.polls&63 == 0 {
			if err := ep.pollActive(); err != nil {
				return err
			}
		}
	}
	for range maxCellsPerPoll {
		if ep.satisfied() {
			break
		}
		off, c, err := ep.recvQ.dequeue(ep.seg)
		if err != nil {
			return ep.fail(err)
		}
		if off == 0 {
			break
		}
		ep.arrived++
		if err := ep.handleCell(off, c); err != nil {
			return ep.fail(err)
		}
	}
	if n := ep.net; n != nil && (n.inflight|ep.wildcards|ep.netExpect != 0 || ep.polls&63 == 0) {
		if err := ep.pollNet(); err != nil {
			return ep.fail(err)
		}
	}
	if ep.lmt != nil {
		if err := ep.lmt.Progress(); err != nil {
			return err
		}
	}
	if ep.am != nil {
		if err := ep.am.Progress(); err != nil {
			return err
		}
	}
	return ep.fatal
}

// progressSends pushes queued sends, visiting only the destinations that
// have some (Poll must not cost O(job size) per call).
func (ep *Endpoint) progressSends() error {
	for i := 0; i < len(ep.sendDsts); {
		dst := ep.sendDsts[i]
		if err := ep.strategy.schedule(ep, int(dst)); err != nil {
			return err
		}
		if ep.sendq[dst].Empty() {
			ep.dropSendDst(i)
		} else {
			i++
		}
	}
	return ep.fatal
}

func (ep *Endpoint) dropSendDst(i int) {
	last := len(ep.sendDsts) - 1
	ep.sendDsts[i] = ep.sendDsts[last]
	ep.sendDsts = ep.sendDsts[:last]
}

// pollFboxes consumes what src's fastboxes hold next in its sequence.
func (ep *Endpoint) pollFboxes(src int) error {
	for range fboxSlots + lineSlots {
		if ep.satisfied() {
			return nil
		}
		if ok, err := ep.pollFbox(src); !ok || err != nil {
			return err
		}
	}
	return nil
}

// satisfied reports whether this Poll has matched a posted receive and
// none is left posted. The messages still in the fastboxes and the queue
// then stay there for the receives to come, instead of each being copied
// into an unexpected-message buffer now and out of it at its receive: a
// receiver behind a stream of small messages copies each once. A Poll that
// matched nothing takes everything in reach, as before, so that cells go
// home to senders that wait for them whatever the receiver posts.
func (ep *Endpoint) satisfied() bool {
	return ep.matched != ep.pollMatched && ep.posted.Front() == nil
}

// pollFbox consumes the fastbox from src where the next message in src's
// sequence would be, if it is full and holds that message; a message with a
// later number waits there until the queue has delivered those before it
// (§3.2). Its header is copied once and only the copy is used (trust.go).
func (ep *Endpoint) pollFbox(src int) (bool, error) {
	p := &ep.peers[src]
	if p.dead != nil && p.distrusted() {
		return false, nil
	}
	if l, ok := p.inLine(); ok {
		return true, ep.takeLine(src, l)
	}
	k := p.recvSeq % fboxSlots
	fb := p.fbIn[k]
	if fb == nil || fb.full.Load() == 0 {
		return false, nil
	}
	h := fb.load()
	if h.seq != p.recvSeq {
		return false, nil
	}
	pl := p.fbInPl[k]
	if h.len > lineSize-fboxHdrSize && h.len <= uint32(len(pl)) {
		// The payload runs into the box's second line (an RTS with
		// its handle, or a CTS with one): ask for it now, while the
		// packet is handled.
		lineops.Prefetch(unsafe.Pointer(&pl[lineSize-fboxHdrSize]))
	}
	if err := ep.checkFbox(src, &h, len(pl)); err != nil {
		return false, ep.distrust(err)
	}
	p.acked = h.ack
	ep.arrived++
	n := int(h.len)
	p.recvSeq++
	var err error
	switch h.kind {
	case kindMsg, kindRTS, kindArena:
		err = ep.arrive(src, int(h.tag), h.kind, int(h.total), pl[:n])
	case kindControl:
		err = ep.lmt.HandleControl(src, ep.private(pl[:n]))
	case kindAM:
		err = ep.handleAM(src, ep.private(pl[:n]))
	}
	lineops.StoreRelease(&fb.full, 0)
	p.released = h.seq + 1
	return true, err
}

// checkFbox checks h, the copy of a full fastbox's header from src whose
// payload area holds room bytes.
func (ep *Endpoint) checkFbox(src int, h *fboxFields, room int) *peerfault.Error {
	p := &ep.peers[src]
	switch {
	case h.len > uint32(room):
		return peerfault.OutOfBounds(src, "length of a fastbox", uint64(h.len), uint64(room))
	case h.ack-p.acked > p.sendSeq-p.acked:
		return peerfault.Corrupt(src, "acknowledgment of a fastbox", "%d, after %d, with %d messages sent to it: goes backwards or past them", h.ack, p.acked, p.sendSeq)
	case p.asm.req != nil || p.asm.ux != nil:
		return peerfault.Corrupt(src, "sequence of a fastbox", "message %d inside a multi-cell message", h.seq)
	}
	switch h.kind {
	case kindMsg:
		if h.total != uint64(h.len) {
			return peerfault.Corrupt(src, "total of a fastbox", "%d for a %d-byte message, which a fastbox holds whole", h.total, h.len)
		}
	case kindRTS, kindArena:
		if h.total > uint64(maxInt) {
			return peerfault.OutOfBounds(src, "total of a fastbox", h.total, uint64(maxInt))
		}
	case kindControl:
		if ep.lmt == nil {
			return peerfault.Corrupt(src, "kind of a fastbox", "an LMT control packet, and this rank has no LMT")
		}
	case kindAM:
	default:
		return peerfault.Corrupt(src, "kind of a fastbox", "%d, which no fastbox carries", h.kind)
	}
	return nil
}

// handleCell delivers one cell taken from the receive queue and returns it
// to the free queue of the rank that owns it. Its header is copied once and
// only the copy is used; the owner is where the cell lies, which the
// header's owner field must agree with (trust.go).
func (ep *Endpoint) handleCell(off uint64, c *cellHdr) error {
	s := ep.seg
	h := c.load()
	if !s.ownsCell(h.owner, off) {
		owner := s.cellOwner(off)
		ep.distrust(peerfault.Corrupt(owner, "owner of a cell", "%d for its cell %#x", h.owner, off))
		return ep.giveBack(owner, off, c)
	}
	src := int(h.owner)
	p := &ep.peers[src]
	if p.dead != nil && p.distrusted() {
		return ep.giveBack(src, off, c)
	}
	err := ep.takeCell(src, off, &h)
	if qerr := ep.giveBack(src, off, c); qerr != nil {
		return qerr
	}
	if err == nil && ep.wildcards > 0 && p.fbIn[0] != nil {
		// src's next message may wait in its fastbox behind this cell,
		// its bell rung while the cell was not yet taken.
		err = ep.pollFboxes(src)
	}
	return err
}

// giveBack returns the cell at off to its owner's free queue.
func (ep *Endpoint) giveBack(owner int, off uint64, c *cellHdr) error {
	o := &ep.peers[owner]
	if err := o.freeQ.enqueue(ep.seg, off, c); err != nil {
		return err
	}
	o.wake()
	return nil
}

// takeCell delivers the packet of the cell at off from src, whose header
// h is the copy handleCell made.
func (ep *Endpoint) takeCell(src int, off uint64, h *cellFields) error {
	s := ep.seg
	p := &ep.peers[src]
	for range fboxSlots + lineSlots {
		if h.seq == p.recvSeq {
			break
		}
		// The messages before this one went through the fastboxes,
		// and are there now: the sender filled them before enqueueing
		// this cell.
		ok, err := ep.pollFbox(src)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		ep.stats.SeqFromFbox++
	}
	if p.dead != nil && p.distrusted() {
		return nil // failed for what its fastboxes held
	}
	if perr := ep.checkCell(src, h); perr != nil {
		return ep.distrust(perr)
	}
	p.recvSeq++
	pl := s.payload(off)[:h.len]
	var err error
	switch h.kind {
	case kindMsg, kindRTS, kindArena:
		err = ep.arrive(src, int(h.tag), h.kind, int(h.total), pl)
	case kindCont:
		err = ep.continueMsg(src, pl)
	case kindControl:
		if ep.lmt == nil {
			err = errorf(ErrNoLMT, "control packet from rank %d", src)
		} else {
			err = ep.lmt.HandleControl(src, ep.private(pl))
		}
	case kindFboxSetup:
		err = ep.attachSet(src, h.total)
	case kindAM:
		err = ep.handleAM(src, ep.private(pl))
	case kindAgg:
		err = ep.arriveAggregate(src, h.seq, h.total, pl)
	}
	p.released = p.recvSeq // past every message of an aggregate cell
	return err
}

// checkCell checks h, the copy of a cell's header from src.
func (ep *Endpoint) checkCell(src int, h *cellFields) *peerfault.Error {
	p := &ep.peers[src]
	switch {
	case h.src != uint32(src):
		return peerfault.Corrupt(src, "source of a cell", "%d in a cell of rank %d", h.src, src)
	case h.seq != p.recvSeq:
		return peerfault.Corrupt(src, "sequence of a cell", "%d, expected %d", h.seq, p.recvSeq)
	case h.len > uint32(ep.seg.payloadSize):
		return peerfault.OutOfBounds(src, "length of a cell", uint64(h.len), uint64(ep.seg.payloadSize))
	}
	inMsg := p.asm.req != nil || p.asm.ux != nil
	switch h.kind {
	case kindMsg, kindRTS, kindArena:
		if h.total > uint64(maxInt) {
			return peerfault.OutOfBounds(src, "total of a cell", h.total, uint64(maxInt))
		}
		if h.kind == kindMsg && uint64(h.len) > h.total {
			return peerfault.OutOfBounds(src, "length of a cell", uint64(h.len), h.total)
		}
	case kindCont, kindControl, kindFboxSetup, kindAM:
		return nil
	case kindAgg:
	default:
		return peerfault.Corrupt(src, "kind of a cell", "%d, which no cell carries", h.kind)
	}
	if inMsg {
		return peerfault.Corrupt(src, "kind of a cell", "a new message (kind %d) before the end of the previous one", h.kind)
	}
	return nil
}

// arrive matches the first piece of a message (all of it when total ==
// len(data)) against the posted receives, in the order they were posted, or
// keeps it as unexpected. For an RTS, data is the LMT's handle.
func (ep *Endpoint) arrive(src, tag int, kind uint32, total int, data []byte) error {
	for r := ep.posted.Front(); r != nil; r = r.links.Next() {
		if (r.peer == src || r.peer == AnySource) && (r.tag == tag || r.tag == AnyTag && tag <= MaxTag) {
			ep.posted.Remove(&r.links)
			ep.expect(r.peer, -1)
			ep.matched++
			r.peer, r.tag, r.msgLen = src, tag, total
			switch kind {
			case kindRTS:
				return ep.startLMTRecv(r, ep.private(data))
			case kindArena:
				return ep.recvArena(r, ep.private(data))
			}
			// deliver, by hand: too big to inline, and this is
			// every small message's path.
			if r.vec {
				r.scatter(data)
			} else {
				r.n = memcopy.Copy(r.buf[0], data)
			}
			if total > len(data) {
				ep.peers[src].asm = assembly{req: r, got: len(data)}
				return nil
			}
			ep.finishRecv(r)
			return nil
		}
	}
	ep.stats.Unexpected++
	u := ep.newUnexpected(src, tag, kind, total, data)
	if kind == kindMsg && total > len(data) {
		ep.peers[src].asm = assembly{ux: u, got: len(data)}
	}
	return nil
}

// continueMsg adds a continuation cell to the multi-cell message from src.
func (ep *Endpoint) continueMsg(src int, data []byte) error {
	a := &ep.peers[src].asm
	var total int
	switch {
	case a.req != nil:
		total = a.req.msgLen
	case a.ux != nil:
		total = a.ux.total
	default:
		return ep.distrust(peerfault.Corrupt(src, "kind of a continuation", "no message to continue"))
	}
	if len(data) > total-a.got {
		return ep.distrust(peerfault.OutOfBounds(src, "length of a continuation", uint64(len(data)), uint64(total-a.got)))
	}
	if r := a.req; r != nil {
		r.deliver(data)
	} else {
		memcopy.Copy(a.ux.grow(a.got, len(data)), data)
	}
	a.got += len(data)
	if a.got < total {
		return nil
	}
	r, u := a.req, a.ux
	*a = assembly{}
	if r != nil {
		ep.finishRecv(r)
	} else {
		u.complete = true
	}
	return nil
}

func (ep *Endpoint) finishRecv(r *Request) {
	var err error
	if r.msgLen > r.room {
		err = truncErr(r.msgLen, r.room)
	}
	ep.finish(r, r.n, err)
}

func (ep *Endpoint) startLMTRecv(r *Request, rts []byte) error {
	if ep.lmt == nil {
		ep.finish(r, 0, errorf(ErrNoLMT, "rank %d sent a %d-byte message by rendezvous", r.peer, r.msgLen))
		return nil
	}
	if r.typ != nil && !ep.lmtTypes {
		ep.finish(r, 0, errorf(ErrNotSupported, "rank %d sent a %d-byte message by rendezvous to a typed receive, and this rank's LMT does not take datatypes", r.peer, r.msgLen))
		return nil
	}
	ep.holdLMT(r)
	if err := ep.lmt.StartRecv(r, rts); err != nil {
		ep.releaseLMT(r)
		r.viaLMT = false
		ep.finish(r, 0, err)
	}
	return nil
}

// takeUnexpected completes (or continues) receive r with unexpected message u.
func (ep *Endpoint) takeUnexpected(r *Request, u *uxMsg) error {
	ep.unexp.Remove(&u.links)
	return ep.takeMessage(r, u)
}

// takeMessage completes (or continues) receive r with message u, off the
// unexpected list: taken there, or by Improbe (mprobe.go).
func (ep *Endpoint) takeMessage(r *Request, u *uxMsg) error {
	defer ep.freeUnexpected(u)
	r.peer, r.tag, r.msgLen = u.src, u.tag, u.total
	switch u.kind {
	case kindRTS:
		return ep.startLMTRecv(r, u.data)
	case kindArena:
		return ep.recvArena(r, u.data)
	}
	a := &ep.peers[u.src].asm
	if a.ux == u {
		// Still arriving: what came so far goes to r, the rest directly.
		r.deliver(u.data[:a.got])
		a.ux, a.req = nil, r
		return nil
	}
	r.deliver(u.data)
	ep.finishRecv(r)
	return nil
}

// maxKeptUnexpected bounds the buffers the unexpected-message pool keeps:
// longer ones are left to the garbage collector.
const maxKeptUnexpected = 1 << 20

// uxMsg is a message that arrived before its receive was posted. Its bytes
// are copied out of the cell or fastbox at once, so that the sender's cells
// go back to it whatever the application does; records and their eager-size
// buffers are recycled, so a steady unexpected flow allocates nothing.
type uxMsg struct {
	src, tag int
	kind     uint32
	total    int    // message length
	data     []byte // payload (or the RTS handle)
	small    []byte // recycled buffer of one cell payload
	big      []byte // recycled buffer for multi-cell messages, ≤ maxKeptUnexpected
	complete bool
	// held: taken off the list by Improbe, for the Message that holds
	// it; gen counts the record's reuses, so that a stale Message (a
	// copy of one already received) is told from the record's new one.
	held  bool
	gen   uint32
	links ilist.Links[uxMsg] // on the unexpected list, or in the pool
}

func (u *uxMsg) status() Status {
	return Status{Source: u.src, Tag: u.tag, Len: u.total}
}

// matchUnexpected returns the oldest unexpected message matching src and
// tag (either may be a wildcard), nil when none does.
func (ep *Endpoint) matchUnexpected(src, tag int) *uxMsg {
	for u := ep.unexp.Front(); u != nil; u = u.links.Next() {
		if (src == AnySource || u.src == src) && (tag == AnyTag && u.tag <= MaxTag || u.tag == tag) {
			return u
		}
	}
	return nil
}

func (ep *Endpoint) newUnexpected(src, tag int, kind uint32, total int, data []byte) *uxMsg {
	u := ep.uxPool.Front()
	if u != nil {
		ep.uxPool.Remove(&u.links)
	} else {
		u = &uxMsg{small: make([]byte, max(ep.seg.payloadSize, ep.seg.fboxPayload))}
	}
	// What came, not what the sender announced: a multi-cell
	// message's buffer grows as its cells arrive (grow), so that no
	// rank makes this one allocate what it does not send.
	size := len(data)
	switch {
	case size <= len(u.small):
		u.data = u.small[:size]
	case size <= cap(u.big):
		u.data = u.big[:size]
	default:
		u.data = make([]byte, size) // a long message with no receive posted
		if size <= maxKeptUnexpected {
			u.big = u.data
		}
	}
	memcopy.Copy(u.data, data)
	u.src, u.tag, u.kind, u.total = src, tag, kind, total
	u.complete = kind == kindRTS || kind == kindArena || total == len(data)
	ep.unexp.PushBack(u, &u.links)
	return u
}

// grow makes room in u's buffer for n more bytes after the first got,
// and returns it: the recycled buffer when it is long enough, else one
// twice as long, up to the message's total, which continueMsg has checked
// the bytes against.
func (u *uxMsg) grow(got, n int) []byte {
	if need := got + n; need > cap(u.data) {
		b := u.big[:0]
		if need > cap(b) {
			b = make([]byte, 0, min(max(2*cap(u.data), need), u.total))
			if cap(b) <= maxKeptUnexpected {
				u.big = b
			}
		}
		u.data = append(b, u.data[:got]...) // what came so far, moved once per doubling
	}
	u.data = u.data[:got+n]
	return u.data[got:]
}

func (ep *Endpoint) freeUnexpected(u *uxMsg) {
	*u = uxMsg{small: u.small, big: u.big, gen: u.gen + 1}
	ep.uxPool.PushBack(u, &u.links)
}
