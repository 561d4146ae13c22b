package nemesis

import "context"

// Completion and probing: Test and Wait on one request, WaitFor on any
// condition, Iprobe and Probe on the unexpected queue. Every blocked call
// is the one wait loop (package internal/await) over the endpoint
// (waitloop.go).

// Test progresses communication once and reports whether r has completed,
// with its error.
func (ep *Endpoint) Test(r *Request) (bool, error) {
	if r.state == stateIdle || r.ep != ep {
		return false, errorf(ErrInvalidArg, "request was not started on this endpoint")
	}
	if r.state != stateDone {
		if err := ep.Poll(); err != nil {
			return false, err
		}
		if r.state != stateDone {
			return false, nil
		}
	}
	return true, r.err
}

// Wait blocks until r completes and returns its error. While waiting it
// polls, then, after polls that moved nothing, yields the CPU, and checks
// peers' liveness every LivenessInterval: a request that depends on a dead
// rank fails with a *PeerError.
func (ep *Endpoint) Wait(r *Request) error {
	if r.state == stateIdle || r.ep != ep {
		return errorf(ErrInvalidArg, "request was not started on this endpoint")
	}
	if r.state == stateDone {
		return r.err
	}
	if err := ep.wait(context.Background(), (*requestDone)(r)); err != nil {
		return err
	}
	return r.err
}

// requestDone is a Request as the wait loop's condition: a pointer
// conversion, so that Wait allocates nothing.
type requestDone Request

func (r *requestDone) Done() (bool, error) { return r.state == stateDone, nil }

// WaitFor drives the endpoint until done reports true, waiting as Wait
// does: spinning while anything moves, then sleeping on the LMT's
// descriptors or yielding, and checking that the peers live, so that a
// condition that depends on a dead peer ends through the LMT's PeerFailed.
// An LMT drains the sends it completed early with it before it is
// detached.
func (ep *Endpoint) WaitFor(done func() bool) error {
	return ep.wait(context.Background(), doneFunc(done))
}

// doneFunc is a func() bool as the wait loop's condition.
type doneFunc func() bool

func (f doneFunc) Done() (bool, error) { return f(), nil }

// Iprobe reports, without receiving it, whether a message from src with tag
// has arrived (wildcards allowed).
func (ep *Endpoint) Iprobe(src, tag int) (Status, bool, error) {
	if err := ep.checkRank(src, true); err != nil {
		return Status{}, false, err
	}
	if err := checkTag(tag, true); err != nil {
		return Status{}, false, err
	}
	return ep.iprobe(src, tag)
}

// Probe waits until a message from src with tag has arrived and describes it.
func (ep *Endpoint) Probe(src, tag int) (Status, error) {
	if st, ok, err := ep.Iprobe(src, tag); err != nil || ok {
		return st, err
	}
	ep.probing = probe{src: src, tag: tag}
	err := ep.wait(context.Background(), (*prober)(ep))
	st := ep.probing.st
	ep.probing = probe{}
	return st, err
}

// probe is what a Probe waits for, and what it found: kept in the
// Endpoint, so that the wait loop's condition is a pointer conversion.
type probe struct {
	src, tag int
	st       Status
}

// prober is an Endpoint as a Probe's condition.
type prober Endpoint

func (p *prober) Done() (bool, error) {
	ep := (*Endpoint)(p)
	st, ok, err := ep.Iprobe(ep.probing.src, ep.probing.tag)
	if err != nil || ok {
		ep.probing.st = st
		return true, err
	}
	return false, ep.unreachable(ep.probing.src)
}

// iprobe is Iprobe's and IprobeLib's match once the arguments are checked:
// a message already here, or one that one Poll brings.
func (ep *Endpoint) iprobe(src, tag int) (Status, bool, error) {
	if u := ep.matchUnexpected(src, tag); u != nil {
		return u.status(), true, nil
	}
	ep.expect(src, +1)
	err := ep.Poll()
	ep.expect(src, -1)
	if err != nil {
		return Status{}, false, err
	}
	if u := ep.matchUnexpected(src, tag); u != nil {
		return u.status(), true, nil
	}
	return Status{}, false, nil
}
