package nemesis

import (
	"errors"
	"fmt"
)

// Cancelling a posted receive, MPI_Cancel for receives: a receive still
// on the posted list has matched nothing, so taking it off the list is
// all it takes, and no later message can match it. Once a message has
// matched it, its bytes are on their way into the buffer (cells, an LMT
// transfer a peer may be driving) and the receive must run to its end.

// Errors of Cancel, to be tested with errors.Is.
var (
	// ErrCanceled completes a receive that Cancel took back: Wait and
	// Test return it, and the buffer holds nothing of any message.
	ErrCanceled = errors.New("nemesis: receive canceled")
	// ErrMatched is Cancel's answer for a receive that has already
	// matched a message (still arriving, or received) or completed
	// otherwise: it cannot be taken back, and Wait gives its result.
	ErrMatched = errors.New("nemesis: receive already matched")
)

// Cancel takes back the receive r, started on this endpoint and not yet
// matched: it completes at once with an error wrapping ErrCanceled, and
// no message is ever matched to it; the messages it would have matched
// go to the receives posted after it, or wait for the next. Cancelling a
// receive already cancelled returns nil again.
//
// A receive that has matched a message, or completed in another way, is
// not cancelled: Cancel returns an error wrapping ErrMatched that names
// the message, and r completes as it would have. A send is refused with
// ErrNotSupported (it may already sit in the receiver's memory), a
// request never started on this endpoint with ErrInvalidArg.
func (ep *Endpoint) Cancel(r *Request) error {
	switch {
	case r == nil || r.state == stateIdle || r.ep != ep:
		return errorf(ErrInvalidArg, "Cancel of a request not started on this endpoint")
	case r.op != opRecv:
		return errorf(ErrNotSupported, "Cancel of a send to rank %d: only receives can be cancelled", r.peer)
	case r.state == stateDone && errors.Is(r.err, ErrCanceled):
		return nil
	case r.state == stateDone:
		return errorf(ErrMatched, "the receive completed (message from rank %d, tag %d, %d bytes; error %v)", r.peer, r.tag, r.msgLen, r.err)
	}
	for p := ep.posted.Front(); p != nil; p = p.links.Next() {
		if p == r {
			ep.posted.Remove(&r.links)
			ep.expect(r.peer, -1)
			ep.finish(r, 0, errorf(ErrCanceled, "receive from %s with %s", wildName(r.peer, AnySource, "rank"), wildName(r.tag, AnyTag, "tag")))
			return nil
		}
	}
	return errorf(ErrMatched, "the receive matched a message from rank %d, tag %d, %d bytes, still arriving: Wait for it", r.peer, r.tag, r.msgLen)
}

// wildName names a rank or tag of a receive, or its wildcard.
func wildName(v, wild int, what string) string {
	if v == wild {
		return "any " + what
	}
	return fmt.Sprintf("%s %d", what, v)
}
