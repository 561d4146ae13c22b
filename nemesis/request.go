package nemesis

// AnySource and AnyTag are the wildcards of Irecv, Recv and Probe.
const (
	AnySource = -1
	AnyTag    = -1
	// MaxTag is the largest tag a message may carry; tags are 0..MaxTag.
	MaxTag = 1<<30 - 1
)

type reqOp uint8

const (
	opNone reqOp = iota
	opSend
	opRecv
)

type reqState uint8

const (
	stateIdle reqState = iota
	statePending
	stateDone
)

// Request is one non-blocking send or receive. The caller owns its storage
// (declare it, or keep a slice of them) and passes it to Isend or Irecv, so
// that starting an operation allocates nothing. A Request may be reused
// once Wait or Test has reported it complete. Its buffer belongs to the
// endpoint until then.
type Request struct {
	// LMTData is free for the LMT to hang its per-transfer state on. The
	// endpoint never touches it, not even when the request is reused, so
	// that the LMT finds there the state of the request's previous
	// message and can recycle it instead of allocating anew.
	LMTData any

	ep     *Endpoint
	op     reqOp
	state  reqState
	inLMT  bool // the LMT holds it; only Complete finishes it
	viaLMT bool // the current message was handed to the LMT
	peer   int  // destination, or the source asked for (AnySource) then matched
	tag    int  // tag (AnyTag until matched for a wildcard receive)
	buf    []byte
	msgLen int   // sender's message length (recv: known once matched)
	n      int   // bytes moved so far / at completion
	err    error // completion status
	sent   int   // send: payload bytes already put into cells
	seqd   bool  // send: first cell or fastbox already sent

	prev, next *Request // in the posted-receive or per-destination send list
}

// Peer returns the destination of a send, or the source of a receive once it
// has matched (AnySource before).
func (r *Request) Peer() int { return r.peer }

// Tag returns the tag of a send, or of the matched message for a receive.
func (r *Request) Tag() int { return r.tag }

// Len returns the length of the message: the sender's, for a receive that
// has matched (it may exceed len(Buf()), in which case the receive reports
// ErrTruncated).
func (r *Request) Len() int { return r.msgLen }

// ViaLMT reports whether the request's current message was handed to the
// LMT (so that LMTData describes it, not an earlier message).
func (r *Request) ViaLMT() bool { return r.viaLMT }

// Buf returns the user buffer of the request.
func (r *Request) Buf() []byte { return r.buf }

// IsSend tells a send request from a receive.
func (r *Request) IsSend() bool { return r.op == opSend }

// Done reports whether the request has completed (without progressing it;
// use Test to progress).
func (r *Request) Done() bool { return r.state == stateDone }

// Status describes a received or probed message.
type Status struct {
	Source int // rank that sent it
	Tag    int
	Len    int // the sender's length in bytes
	Count  int // bytes written to the receive buffer (≤ Len)
}

// Status returns the completion status of a finished receive.
func (r *Request) Status() Status {
	return Status{Source: r.peer, Tag: r.tag, Len: r.msgLen, Count: r.n}
}

// reqList is an intrusive FIFO of requests: no allocation per message.
type reqList struct{ head, tail *Request }

func (l *reqList) push(r *Request) {
	r.next, r.prev = nil, l.tail
	if l.tail == nil {
		l.head = r
	} else {
		l.tail.next = r
	}
	l.tail = r
}

func (l *reqList) remove(r *Request) {
	if r.prev == nil {
		l.head = r.next
	} else {
		r.prev.next = r.next
	}
	if r.next == nil {
		l.tail = r.prev
	} else {
		r.next.prev = r.prev
	}
	r.prev, r.next = nil, nil
}
