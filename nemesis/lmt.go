package nemesis

import (
	"time"

	"github.com/knemesis/knemesis/internal/memcopy"
	"golang.org/x/sys/unix"
)

// LMT is the large-message transfer layer to which an Endpoint hands every
// message longer than the eager limit given to [Endpoint.SetLMT] (the LMT
// interface of Buntinas, Goglin, Goodell, Mercier and Moreaud,
// "Cache-Efficient, Intranode, Large-Message MPI Communication with
// MPICH2-Nemesis", ICPP 2009: the rendezvous goes through the Nemesis
// queues, the payload through a backend: shm double buffer, pipe,
// vmsplice, CMA, KNEM).
//
// The protocol the endpoint runs around an LMT:
//
//  1. Sender: Isend or Isendv of n > eagerMax bytes takes a cell from its
//     free queue and calls StartSend(r, rts) with rts = the cell's payload
//     area. The LMT writes its backend handle (cookie, iovec address,
//     pipe name...) into rts and returns how many bytes it used. The
//     endpoint sends the cell as an RTS carrying the match information
//     (source, tag, n) in the same per-pair sequence as eager messages, so
//     matching order and non-overtaking per (source, tag) are exactly
//     those of eager messages.
//     r stays pending until the LMT calls [Endpoint.Complete].
//  2. Receiver: when the RTS matches a receive (posted before or after the
//     RTS arrived), the endpoint calls StartRecv(r, rts). r.Peer() is the
//     sender, r.Tag() the message's tag, r.Len() the sender's length and
//     r.Iov() the receive buffers (one entry for Irecv, the caller's list
//     for Irecvv). r.Cap() may be less than r.Len(): the LMT then moves only
//     r.Cap() bytes, still lets the sender finish, and the endpoint reports
//     ErrTruncated for the receive. rts is only valid during the call (it
//     may live in a shared cell): copy what must outlive it.
//  3. Both sides: the LMT talks to its peer with [Endpoint.SendControl]
//     (CTS, DONE, ...). Each such packet is delivered, in order with
//     everything else sent by that peer, to the peer's HandleControl.
//  4. Both sides: every [Endpoint.Poll] calls Progress, so that a transfer
//     advances while the application waits in Wait, Recv, Probe or Poll.
//     The LMT finishes a request with [Endpoint.Complete](r, n, err).
//  5. When a peer dies, the endpoint calls PeerFailed(rank, err) once; the
//     LMT must Complete every request it holds with that rank, with err.
//
// On both sides r.Iov() is the payload, whichever of Isend/Isendv or
// Irecv/Irecvv started the request: an LMT that hands it to its backend as
// is moves scattered buffers without packing them. r.Buf() is only set for
// the single-buffer calls, and for the typed ones (IsendType, IrecvType),
// whose r.Type() describes the payload over it and whose r.Iov() is nil:
// only an LMT that says so (LMTDatatypes) is handed those.
//
// Errors: report the failure of one transfer through Complete. An error
// returned by HandleControl means the packet stream itself is broken and
// fails the endpoint like a corrupted cell; one returned by Progress is
// returned by that Poll (and so by the Wait or Recv running it).
//
// All methods are called from the goroutine driving the endpoint (an
// Endpoint is not safe for concurrent use), never concurrently. They must not
// block: return and let the next Progress call continue. They may call
// SendControl, Complete and Poll-free Endpoint accessors, but not Poll,
// Wait, Send or Recv (no re-entrancy).
type LMT interface {
	// StartSend fills rts with the handle the receiver needs and returns its
	// length (at most len(rts) = cell payload size). An error fails the Isend
	// at once and no RTS is sent.
	StartSend(r *Request, rts []byte) (n int, err error)
	// StartRecv is called when an RTS has matched receive r. An error
	// completes r with that error (the LMT must then have told the sender,
	// or the send stays pending until the sender's LMT gives up).
	StartRecv(r *Request, rts []byte) error
	// HandleControl receives a packet the LMT of rank src sent with
	// SendControl. pkt is only valid during the call.
	HandleControl(src int, pkt []byte) error
	// Progress advances transfers in flight; called from every Poll.
	Progress() error
	// PeerFailed fails every transfer with rank, whose process is gone.
	PeerFailed(rank int, err error)
}

// SetLMT routes messages longer than eagerMax bytes through l; messages of
// eagerMax bytes or fewer stay on the fastbox/cells path (several cells when
// eagerMax exceeds CellPayload). Without an LMT (the default, or l == nil)
// long messages go as a series of cells, which is correct but copies twice.
//
// Every rank of a job must make the same choice before its first send of a
// long message: an RTS reaching an endpoint without an LMT is an error.
func (ep *Endpoint) SetLMT(l LMT, eagerMax int) error {
	if l == nil {
		ep.lmt, ep.lmtMeter, ep.lmtFds, ep.chooser, ep.lmtTypes, ep.lmtArena = nil, nil, nil, nil, false, nil
		ep.eagerMax, ep.chooseAbove = maxInt, maxInt
		return nil
	}
	if eagerMax < 0 {
		return errorf(ErrInvalidArg, "eager limit %d is negative", eagerMax)
	}
	ep.lmt, ep.eagerMax, ep.chooseAbove = l, eagerMax, eagerMax
	ep.lmtMeter, _ = l.(LMTMeter)
	ep.lmtFds, _ = l.(LMTPoller)
	ep.lmtArena, _ = l.(LMTArena)
	d, ok := l.(LMTDatatypes)
	ep.lmtTypes = ok && d.Datatypes()
	if ep.chooser, _ = l.(LMTChooser); ep.chooser != nil {
		ep.chooseAbove = max(min(ep.chooser.ChooseAbove(), eagerMax), 0)
	}
	return nil
}

// LMTChooser is implemented by an LMT that decides, message by message and
// per peer, which messages up to the eager limit still go through it: the
// eager/LMT switch of each pair, learned from transfer times rather than
// one size for the whole endpoint. The endpoint asks ViaLMT for every
// message of more than ChooseAbove() (read at SetLMT) and at most eagerMax
// bytes, and reports through EagerSent how long each one it then sent
// eagerly took to copy into the cells or fastbox, from the call to the
// send's completion (a send that had to wait for cells is not reported:
// its time is the receiver's, not the copy's).
type LMTChooser interface {
	ChooseAbove() int
	ViaLMT(peer, n int) bool
	EagerSent(peer, n int, d time.Duration)
}

// LMTPoller is implemented by an LMT whose transfers may wait on file
// descriptors (a pipe to fill or drain). A blocked call with nothing to do
// then sleeps in poll(2) on them, as a blocking read or write would, and
// the kernel wakes it when the peer has written or read: spinning would
// only take the CPU from that peer. So Wait, Recv and Probe serve the LMT
// too, and no second wait loop is needed above the endpoint.
type LMTPoller interface {
	// PollFds appends the descriptors transfers wait for, with their
	// events, to dst.
	PollFds(dst []unix.PollFd) []unix.PollFd
}

// spinBeforePoll is how many idle polls pass before a blocked call sleeps
// on the LMT's descriptors: a pipe's peer usually answers within a few.
const spinBeforePoll = 16

// sleepOnLMT sleeps up to a millisecond in poll(2) on the descriptors the
// LMT's transfers wait for, and reports whether there were any (control
// packets arrive elsewhere: hence the timeout).
func (ep *Endpoint) sleepOnLMT() bool {
	if ep.lmtFds == nil {
		return false
	}
	ep.pollFds = ep.lmtFds.PollFds(ep.pollFds[:0])
	if len(ep.pollFds) == 0 {
		return false
	}
	_, _ = unix.Poll(ep.pollFds, 1)
	return true
}

// LMTMeter is implemented by an LMT that counts the payload bytes it has
// moved. Wait then tells a Poll that advanced a large transfer from an idle
// one, and keeps spinning through the transfer instead of yielding the CPU
// before every chunk once its spin budget is spent.
type LMTMeter interface {
	// BytesMoved returns the payload bytes moved so far, all transfers.
	BytesMoved() uint64
}

// LMTIdler is implemented by an LMT that can tell it has no transfer in
// flight on this side. A blocked call then dozes as long as it would
// without an LMT: nothing reaches this rank through the LMT without a
// packet first (an RTS, a CTS), and a packet wakes it. With transfers in
// flight their payload moves without waking anyone, so the doze stays
// short (see doze.go).
type LMTIdler interface {
	Idle() bool
}

// progressMark changes whenever a packet arrives (in a cell or a fastbox),
// a cell leaves, the LMT moves payload or the AM handler makes progress
// of its own (AMMeter). A blocked call sleeps only after a Poll that left it
// unchanged: a packet a Poll took may be the one the call waits for.
func (ep *Endpoint) progressMark() uint64 {
	m := ep.arrived + ep.stats.Cells
	if ep.net != nil {
		m += ep.net.moved
	}
	if ep.lmtMeter != nil {
		m += ep.lmtMeter.BytesMoved()
	}
	if ep.amMeter != nil {
		m += ep.amMeter.Moved()
	}
	return m
}

// MaxControl is the largest packet SendControl carries: one cell's payload.
func (ep *Endpoint) MaxControl() int { return ep.seg.payloadSize }

// SendControl sends pkt to the LMT of rank dst, without blocking: ok is false
// when no cell is free right now (retry from Progress). Control packets are
// ordered with every other message from this rank to dst.
func (ep *Endpoint) SendControl(dst int, pkt []byte) (ok bool, err error) {
	if dst >= 0 && dst < ep.size && ep.peers[dst].net && ep.net != nil {
		return ep.netControl(dst, pkt)
	}
	return ep.sendShort(dst, kindControl, pkt)
}

// sendShort sends one packet of kind (control, active message) of at most
// a cell's payload, through a fastbox when one is free, else a cell; ok is
// false when neither is free right now.
func (ep *Endpoint) sendShort(dst int, kind uint32, pkt []byte) (ok bool, err error) {
	if err := ep.checkRank(dst, false); err != nil {
		return false, err
	}
	if len(pkt) > ep.seg.payloadSize {
		return false, errorf(ErrInvalidArg, "packet of %d bytes exceeds the %d-byte cell payload", len(pkt), ep.seg.payloadSize)
	}
	if ep.fatal != nil {
		return false, ep.fatal
	}
	if ep.peers[dst].net {
		return false, errorf(ErrNotSupported, "rank %d is on another node: control packets and active messages go between ranks of one node", dst)
	}
	if !ep.sendq[dst].Empty() {
		ep.releaseFor(dst)
	}
	if !ep.sendq[dst].Empty() {
		// Keep packets behind queued sends to dst: the LMT may rely on
		// its DONE following an earlier RTS.
		return ep.sendBehindWindow(dst, kind, pkt)
	}
	p := &ep.peers[dst]
	if len(pkt) <= ep.seg.fboxPayload {
		fb, pl := p.outBox(&ep.stats)
		if fb == nil && p.fbOut[0] == nil {
			fb, pl = ep.claimOutBox(dst)
		}
		if fb != nil {
			memcopy.Copy(pl, pkt)
			p.postFbox(fb, kind, 0, len(pkt), 0)
			if kind == kindControl {
				ep.stats.FastboxCtrl++
			}
			return true, nil
		}
	}
	return ep.sendCell(dst, kind, 0, pkt, 0)
}

// Complete finishes request r, which the LMT was handed by StartSend or
// StartRecv, with n bytes moved and err (nil on success). For a receive whose
// buffer was shorter than the message, the endpoint reports ErrTruncated
// whatever err is nil.
func (ep *Endpoint) Complete(r *Request, n int, err error) {
	if r.state != statePending || !r.inLMT {
		return // a late or duplicate completion must not corrupt request state
	}
	ep.releaseLMT(r)
	if r.op == opSend && !r.seqd {
		ep.unsentRTS(r) // a remote rank's, still in its window
	}
	if err == nil && r.op == opRecv && r.msgLen > r.room {
		err = truncErr(r.msgLen, r.room)
	}
	ep.finish(r, n, err)
}
