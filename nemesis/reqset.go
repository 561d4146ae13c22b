package nemesis

import (
	"context"
	"errors"
	"fmt"
)

// Request sets, MPI's Waitall, Waitany and Testsome, and Sendrecv. A set
// is a slice of the caller's requests, as Request's doc suggests keeping
// them; a zero (never started) Request in it is inactive, MPI's null
// request, and is skipped. WaitAny and TestSome return each completion
// once: the request they returned is marked taken and skipped by their
// later calls until it is started again, as MPI turns it into a null
// request; its Status, Err and buffer stay readable.

// Err returns the error a completed request finished with (nil for a
// success, and while it is pending), without progressing anything.
func (r *Request) Err() error { return r.err }

// WaitAll blocks, as Wait does, until every started request of rs has
// completed. It returns nil when all succeeded; otherwise the errors of
// those that failed joined, each as "request i: err" (errors.Is finds
// each one's sentinel). An error of the endpoint itself (closed, corrupt
// shared state) is returned alone, with requests still pending.
func (ep *Endpoint) WaitAll(rs []Request) error {
	if err := ep.checkSet(rs); err != nil {
		return err
	}
	ep.set = waitSet{rs: rs}
	err := ep.wait(context.Background(), (*allDone)(ep))
	ep.set = waitSet{}
	if err != nil {
		return err
	}
	var errs []error
	for i := range rs {
		if rs[i].state == stateDone && rs[i].err != nil {
			errs = append(errs, fmt.Errorf("request %d: %w", i, rs[i].err))
		}
	}
	return errors.Join(errs...)
}

// WaitAny blocks until a started request of rs that WaitAny or TestSome
// has not yet returned is complete, and returns its index (the lowest of
// several) and its error, marking it taken. With no such request it
// returns -1 and nil at once (MPI_UNDEFINED). An error of the endpoint
// itself comes with index -1.
func (ep *Endpoint) WaitAny(rs []Request) (int, error) {
	if err := ep.checkSet(rs); err != nil {
		return -1, err
	}
	ep.set = waitSet{rs: rs, found: -1}
	err := ep.wait(context.Background(), (*anyDone)(ep))
	found := ep.set.found
	ep.set = waitSet{}
	if err != nil || found < 0 {
		return -1, err
	}
	rs[found].taken = true
	return found, rs[found].err
}

// TestSome progresses communication once and appends to done the index
// of every started request of rs that has completed and that WaitAny or
// TestSome has not yet returned, in index order, marking each taken. It
// returns done, which has grown by nothing when none completed (or none
// is active); each request's own error is its Err. The returned error is
// the endpoint's (closed, corrupt shared state), not a request's.
func (ep *Endpoint) TestSome(rs []Request, done []int) ([]int, error) {
	if err := ep.checkSet(rs); err != nil {
		return done, err
	}
	if err := ep.Poll(); err != nil {
		return done, err
	}
	for i := range rs {
		if r := &rs[i]; r.state == stateDone && !r.taken {
			r.taken = true
			done = append(done, i)
		}
	}
	return done, nil
}

// firstDone returns the lowest index of a complete request not yet taken
// (-1 for none), and whether any request is still active: pending, or
// complete and not taken.
func firstDone(rs []Request) (int, bool) {
	active := false
	for i := range rs {
		switch r := &rs[i]; {
		case r.state == stateDone && !r.taken:
			return i, true
		case r.state == statePending:
			active = true
		}
	}
	return -1, active
}

// checkSet refuses a set holding a request started on another endpoint,
// whose progress this one cannot make.
func (ep *Endpoint) checkSet(rs []Request) error {
	for i := range rs {
		if rs[i].state != stateIdle && rs[i].ep != ep {
			return errorf(ErrInvalidArg, "request %d of the set was started on another endpoint", i)
		}
	}
	return nil
}

// Sendrecv sends sbuf to dst with stag and receives into rbuf a message
// from src with rtag (wildcards allowed) at once, as MPI_Sendrecv: the
// receive is posted before the send starts, so that ranks exchanging in
// a ring or pairs never wait on each other. It returns once both are
// complete, with the receive's status. sbuf and rbuf must not overlap.
// The send's failure is returned as "send to rank d: err" joined with the
// receive's, whose own error (ErrTruncated, a *PeerError) is returned as
// Recv returns it. Arguments are checked before anything starts.
func (ep *Endpoint) Sendrecv(dst, stag int, sbuf []byte, src, rtag int, rbuf []byte) (Status, error) {
	r, s := &ep.blocker, &ep.partner
	if err := ep.validate(s, dst, stag, false); err != nil {
		return Status{}, err
	}
	if err := ep.Irecv(r, src, rtag, rbuf); err != nil {
		return Status{}, err
	}
	if err := ep.Isend(s, dst, stag, sbuf); err != nil {
		return Status{}, err // not after validate: only a closed endpoint
	}
	if err := ep.wait(context.Background(), (*pairDone)(ep)); err != nil {
		return Status{}, err
	}
	if s.err != nil {
		return r.Status(), errors.Join(fmt.Errorf("send to rank %d: %w", dst, s.err), r.err)
	}
	return r.Status(), r.err
}

// The conditions of the set waits are the endpoint itself, converted: a
// closure passed to the wait loop as an interface would escape and cost an
// allocation per call, and the endpoint (one goroutine's) can hold the
// set for the length of the wait.

// waitSet is a set wait's state: the requests, how many from the start
// are known complete or inactive (WaitAll), the one found (WaitAny).
type waitSet struct {
	rs    []Request
	next  int
	found int
}

// allDone is WaitAll's condition: every request of the set is complete.
type allDone Endpoint

func (c *allDone) Done() (bool, error) {
	s := &c.set
	for s.next < len(s.rs) && s.rs[s.next].state != statePending {
		s.next++
	}
	return s.next == len(s.rs), nil
}

// anyDone is WaitAny's condition: one request is complete and not yet
// taken, or none is active.
type anyDone Endpoint

func (c *anyDone) Done() (bool, error) {
	var active bool
	c.set.found, active = firstDone(c.set.rs)
	return c.set.found >= 0 || !active, nil
}

// pairDone is Sendrecv's condition: its receive and its send are both
// complete.
type pairDone Endpoint

func (c *pairDone) Done() (bool, error) {
	return c.blocker.state == stateDone && c.partner.state == stateDone, nil
}
