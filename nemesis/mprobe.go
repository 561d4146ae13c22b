package nemesis

// Matched probes, MPI_Improbe and MPI_Mrecv: a probe that also takes the
// message it found out of matching, so that the receive that follows gets
// that very message, whatever other receives (a wildcard one, another
// part of the program) are posted in between. The message's record leaves
// the unexpected list for the Message that holds it and goes back to the
// pool when Imrecv delivers it.

// Message is a message that Improbe or Mprobe took out of matching: no
// receive but Imrecv or Mrecv of this Message can get it. The zero value
// holds no message. A Message is received once; a copy of it is no
// second handle: receiving the copy too is refused.
type Message struct {
	ep  *Endpoint
	u   *uxMsg
	gen uint32 // u.gen when taken: the record may since serve another message
	st  Status
}

// Status describes the message: its source, tag and length (Count 0).
// It stays readable after the message is received.
func (m *Message) Status() Status { return m.st }

// Improbe reports whether a message from src with tag (wildcards allowed)
// has arrived and, if so, takes it out of matching into a Message, to be
// received by Imrecv or Mrecv: the oldest such message, as a receive
// would match it. A message whose bytes are still arriving (a long one
// going through the cells) is reported once they all have; until then
// Improbe reports false, and takes no later one in its place.
func (ep *Endpoint) Improbe(src, tag int) (Message, bool, error) {
	if _, ok, err := ep.Iprobe(src, tag); !ok || err != nil {
		return Message{}, false, err
	}
	u := ep.matchUnexpected(src, tag) // the one Iprobe found
	if !u.complete {
		// Iprobe found it without polling: poll, so that its next
		// cells come in and the sender gets the cells back.
		if err := ep.Poll(); err != nil {
			return Message{}, false, err
		}
		if !u.complete {
			return Message{}, false, nil
		}
	}
	ep.unexp.Remove(&u.links)
	u.held = true
	return Message{ep: ep, u: u, gen: u.gen, st: u.status()}, true, nil
}

// Mprobe waits, as Probe does, until Improbe takes a message from src
// with tag, and returns it. A source that died, or for AnySource every
// source, fails it with a *PeerError.
func (ep *Endpoint) Mprobe(src, tag int) (Message, error) {
	var m Message
	var found bool
	var err error
	werr := ep.WaitFor(func() bool {
		m, found, err = ep.Improbe(src, tag)
		if err == nil && !found {
			err = ep.unreachable(src)
		}
		return found || err != nil
	})
	if werr != nil {
		return Message{}, werr
	}
	return m, err
}

// Imrecv starts receiving m's message into buf, as Irecv would have: a
// longer message completes r with ErrTruncated after filling buf. A zero
// Message, one from another endpoint, or one already received is refused
// with ErrInvalidArg; m holds no message afterwards (its Status stays).
func (ep *Endpoint) Imrecv(r *Request, m *Message, buf []byte) error {
	if m == nil || m.ep != ep || m.u == nil || !m.u.held || m.u.gen != m.gen {
		return errorf(ErrInvalidArg, "Imrecv of a message not taken by this endpoint's Improbe, or already received")
	}
	u := m.u
	if err := ep.validate(r, u.src, u.tag, false); err != nil {
		return err
	}
	m.u = nil
	u.held = false
	r.start(ep, opRecv, u.src, u.tag)
	r.buf[0], r.room = buf, len(buf)
	return ep.takeMessage(r, u)
}

// Mrecv receives m's message into buf (see Imrecv) and returns its status.
func (ep *Endpoint) Mrecv(m *Message, buf []byte) (Status, error) {
	r := &ep.blocker
	if err := ep.Imrecv(r, m, buf); err != nil {
		return Status{}, err
	}
	err := ep.Wait(r)
	return r.Status(), err
}
