package nemesis

import (
	"time"

	"github.com/knemesis/knemesis/internal/fastclock"
)

// The two-sided operations: nonblocking sends and receives of one buffer
// or an iovec list, and their blocking forms, which wait on the request.

// Isend starts sending buf to rank dst with tag. buf must not change until
// r completes. Argument errors are returned at once; failures of the
// transfer itself complete r with an error.
func (ep *Endpoint) Isend(r *Request, dst, tag int, buf []byte) error {
	if err := ep.validate(r, dst, tag, false); err != nil {
		return err
	}
	r.start(ep, opSend, dst, tag)
	r.buf[0], r.msgLen = buf, len(buf)
	ep.startSend(r)
	return nil
}

// Isendv is Isend of the message made of iov's entries end to end: its
// length is the sum of theirs, zero-length entries are skipped wherever
// they are, and an empty or nil list sends a zero-length message. The
// receiver cannot tell it from an Isend of the same bytes. Neither the list
// nor its buffers may change until r completes; r keeps the caller's list,
// so starting the send allocates nothing. Small messages are gathered
// straight into the cells, large ones go to the LMT as the list itself
// (Request.Iov), for a backend to move without packing.
func (ep *Endpoint) Isendv(r *Request, dst, tag int, iov [][]byte) error {
	if err := ep.validate(r, dst, tag, false); err != nil {
		return err
	}
	r.start(ep, opSend, dst, tag)
	r.vec, r.iov, r.msgLen = true, iov, iovLen(iov)
	ep.startSend(r)
	return nil
}

// startSend puts the send r, set up by Isend or Isendv, on its way, or
// behind the sends to the same rank still waiting for cells.
func (ep *Endpoint) startSend(r *Request) {
	if err := ep.peers[r.peer].dead; err != nil {
		ep.finish(r, 0, err)
		return
	}
	if !ep.sendq[r.peer].Empty() || ep.batching {
		ep.queueSend(r)
		return
	}
	chosen := r.msgLen > ep.chooseAbove && r.msgLen <= ep.eagerMax
	var t0 int64
	if chosen {
		t0 = fastclock.Nanotime()
	}
	res, err := ep.trySend(r)
	switch {
	case err != nil:
		ep.finish(r, 0, err)
	case res == sendDone:
		if chosen {
			ep.chooser.EagerSent(r.peer, r.msgLen, time.Duration(fastclock.Nanotime()-t0))
		}
		ep.finish(r, r.msgLen, nil)
	case res == sendHanded:
	default:
		ep.queueSend(r)
	}
}

// Irecv starts receiving into buf a message from src (or AnySource) with tag
// (or AnyTag). A longer message completes r with ErrTruncated after filling
// buf, never writing past it.
func (ep *Endpoint) Irecv(r *Request, src, tag int, buf []byte) error {
	if err := ep.validate(r, src, tag, true); err != nil {
		return err
	}
	r.start(ep, opRecv, src, tag)
	r.buf[0], r.room = buf, len(buf)
	return ep.startRecv(r)
}

// Irecvv is Irecv into the entries of iov, filled one after the other:
// it holds the sum of their lengths, zero-length entries are skipped, and
// an empty or nil list receives a zero-length message. Any message matches,
// whether sent by Isend or Isendv. A longer one fills every entry and
// completes r with ErrTruncated, writing nothing past any entry. Neither the
// list nor its buffers may be touched until r completes.
func (ep *Endpoint) Irecvv(r *Request, src, tag int, iov [][]byte) error {
	if err := ep.validate(r, src, tag, true); err != nil {
		return err
	}
	r.start(ep, opRecv, src, tag)
	r.vec, r.iov, r.room = true, iov, iovLen(iov)
	return ep.startRecv(r)
}

// startRecv matches the receive r, set up by Irecv or Irecvv, against the
// messages that came first, or posts it.
func (ep *Endpoint) startRecv(r *Request) error {
	if u := ep.matchUnexpected(r.peer, r.tag); u != nil {
		return ep.takeUnexpected(r, u)
	}
	if r.peer >= 0 && ep.posted.Empty() {
		if l, ok := ep.peers[r.peer].inLine(); ok && (r.tag == AnyTag && int(l.tag) <= MaxTag || int(l.tag) == r.tag) {
			// The next message from its source waits in a line record,
			// as it does for a receiver behind a stream, and no
			// earlier receive may match it: take it without posting.
			return ep.takeLineInto(r, l)
		}
	}
	if err := ep.unreachable(r.peer); err != nil {
		ep.finish(r, 0, err)
		return nil
	}
	ep.posted.PushBack(r, &r.links)
	ep.expect(r.peer, +1)
	if r.peer >= 0 && ep.posted.Front() == r && ep.peers[r.peer].nextInFbox() {
		// The message may already sit in its fastbox, as it does for a
		// receiver behind a stream: taking it now spares the Poll that
		// Wait or Test would make for it.
		return ep.pollFboxes(r.peer)
	}
	return nil
}

// Send sends buf to dst and returns once buf may be reused.
func (ep *Endpoint) Send(dst, tag int, buf []byte) error {
	r := &ep.blocker
	if err := ep.Isend(r, dst, tag, buf); err != nil {
		return err
	}
	return ep.Wait(r)
}

// Sendv sends the message made of iov's entries (see Isendv) to dst and
// returns once they may be reused.
func (ep *Endpoint) Sendv(dst, tag int, iov [][]byte) error {
	r := &ep.blocker
	if err := ep.Isendv(r, dst, tag, iov); err != nil {
		return err
	}
	return ep.Wait(r)
}

// Recv receives into buf a message from src with tag (wildcards allowed).
func (ep *Endpoint) Recv(src, tag int, buf []byte) (Status, error) {
	r := &ep.blocker
	if err := ep.Irecv(r, src, tag, buf); err != nil {
		return Status{}, err
	}
	err := ep.Wait(r)
	return r.Status(), err
}

// Recvv receives into iov's entries (see Irecvv) a message from src with
// tag (wildcards allowed).
func (ep *Endpoint) Recvv(src, tag int, iov [][]byte) (Status, error) {
	r := &ep.blocker
	if err := ep.Irecvv(r, src, tag, iov); err != nil {
		return Status{}, err
	}
	err := ep.Wait(r)
	return r.Status(), err
}
