package nemesis

// Completion and probing: Test and Wait on one request, WaitFor on any
// condition, Iprobe and Probe on the unexpected queue. A blocked call
// polls, yields, then dozes (doze.go).

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
	var w waiter
	for r.state != stateDone {
		mark := ep.progressMark()
		if err := ep.Poll(); err != nil {
			return err
		}
		if r.state == stateDone {
			break
		}
		if ep.progressMark() != mark {
			// Something moved (cells, LMT chunks): the transfer r waits
			// for is running, and yielding now would hand the CPU away
			// once per chunk for the rest of it.
			if err := ep.busy(&w); err != nil {
				return err
			}
			continue
		}
		if err := ep.idle(&w); err != nil {
			return err
		}
	}
	return r.err
}

// WaitFor drives the endpoint until done reports true, waiting as Wait
// does: spinning while anything moves, then sleeping on the LMT's
// descriptors or yielding, and checking that the peers live, so that a
// condition that depends on a dead peer ends through the LMT's PeerFailed.
// An LMT drains the sends it completed early with it before it is
// detached.
func (ep *Endpoint) WaitFor(done func() bool) error {
	var w waiter
	for !done() {
		mark := ep.progressMark()
		if err := ep.Poll(); err != nil {
			return err
		}
		if done() {
			break
		}
		if ep.progressMark() != mark {
			if err := ep.busy(&w); err != nil {
				return err
			}
			continue
		}
		if err := ep.idle(&w); err != nil {
			return err
		}
	}
	return nil
}

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
	var w waiter
	for {
		st, ok, err := ep.Iprobe(src, tag)
		if err != nil || ok {
			return st, err
		}
		if err := ep.unreachable(src); err != nil {
			return Status{}, err
		}
		if err := ep.idle(&w); err != nil {
			return Status{}, err
		}
	}
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
