package nemesis

// Library tags: the tag space above MaxTag, kept for the layers built on
// an endpoint (package coll gives each communicator its own part of it),
// so that their traffic never meets an application's receive.
//
// The application's calls (Isend, Irecv, Probe, their list and typed
// forms) refuse a library tag with ErrInvalidTag, and AnyTag matches only
// application tags, 0..MaxTag: a wildcard receive or probe never takes a
// library's message. A library tag travels in the same int32 field as an
// application tag, through every path (fastbox, line record, cell,
// aggregate, RTS, network module), and is matched exactly; AnySource
// matches it as it matches any tag.
const (
	MinLibTag = MaxTag + 1
	MaxLibTag = 1<<31 - 1
)

// IsendvLib is Isendv with a library tag (MinLibTag..MaxLibTag).
func (ep *Endpoint) IsendvLib(r *Request, dst, tag int, iov [][]byte) error {
	if err := ep.validateLib(r, dst, tag, false); err != nil {
		return err
	}
	r.start(ep, opSend, dst, tag)
	r.vec, r.iov, r.msgLen = true, iov, iovLen(iov)
	ep.startSend(r)
	return nil
}

// IrecvvLib is Irecvv of a message with a library tag
// (MinLibTag..MaxLibTag, no wildcard) from src (or AnySource).
func (ep *Endpoint) IrecvvLib(r *Request, src, tag int, iov [][]byte) error {
	if err := ep.validateLib(r, src, tag, true); err != nil {
		return err
	}
	r.start(ep, opRecv, src, tag)
	r.vec, r.iov, r.room = true, iov, iovLen(iov)
	return ep.startRecv(r)
}

func (ep *Endpoint) validateLib(r *Request, peer, tag int, wildcard bool) error {
	if tag < MinLibTag || tag > MaxLibTag {
		return errorf(ErrInvalidTag, "library tag %d, want %d..%d", tag, MinLibTag, MaxLibTag)
	}
	switch {
	case r == nil:
		return errorf(ErrInvalidArg, "nil request")
	case ep.fatal != nil:
		return ep.fatal
	case r.state == statePending:
		return ErrRequestInUse
	}
	return ep.checkRank(peer, wildcard)
}

// IprobeLib is Iprobe of a message with a library tag (no wildcard) from
// src (or AnySource): a layer looks with it for a notice it posts no
// receive for, such as another rank's report that a collective failed.
func (ep *Endpoint) IprobeLib(src, tag int) (Status, bool, error) {
	if tag < MinLibTag || tag > MaxLibTag {
		return Status{}, false, errorf(ErrInvalidTag, "library tag %d, want %d..%d", tag, MinLibTag, MaxLibTag)
	}
	if err := ep.checkRank(src, true); err != nil {
		return Status{}, false, err
	}
	return ep.iprobe(src, tag)
}
