package nemesis

import (
	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/internal/memcopy"
	"github.com/knemesis/knemesis/nemesis/internal/ilist"
)

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
// once Wait or Test has reported it complete. Its buffer, or its list and
// the list's buffers, belong to the endpoint until then.
type Request struct {
	// LMTData is free for the LMT to hang its per-transfer state on. The
	// endpoint never touches it, not even when the request is reused, so
	// that the LMT finds there the state of the request's previous
	// message and can recycle it instead of allocating anew.
	LMTData any

	ep     *Endpoint
	op     reqOp
	state  reqState
	inLMT  bool           // the LMT holds it; only Complete finishes it
	viaLMT bool           // the current message was handed to the LMT
	vec    bool           // the payload is in iov (Isendv, Irecvv) or typ, not buf alone
	seqd   bool           // send: first cell or fastbox already sent
	cells  bool           // typed send: the cells carry it whatever its length (lmtTakes)
	held   bool           // send: waits for its full fastbox (hold.go; since when: its peer's heldAt)
	taken  bool           // done, and returned by WaitAny or TestSome, which skip it since (reqset.go)
	peer   int            // destination, or the source asked for (AnySource) then matched
	tag    int            // tag (AnyTag until matched for a wildcard receive)
	buf    [1][]byte      // Isend's or Irecv's buffer: a list of one for Iov
	iov    [][]byte       // Isendv's or Irecvv's list, the caller's own: no allocation
	typ    *datatype.Type // IsendType's or IrecvType's description of buf (typed.go)
	room   int            // recv: bytes the buffer or list holds
	msgLen int            // sender's message length (recv: known once matched)
	n      int            // bytes moved so far / at completion
	cur    int            // vec: the entry the next byte comes from or goes to
	curOff int            // vec: offset of that byte in it
	err    error          // completion status
	sent   int            // send: payload bytes already put into cells
	netOut int32          // packets with the network module, not yet reported
	// netSlot: the packet slot (netPath.ctl) of an LMT send's RTS to a
	// remote rank, from StartSend until the module takes it; of a slot's
	// own request, its index.
	netSlot int32

	links ilist.Links[Request] // in the posted-receive or per-destination send list
}

// Peer returns the destination of a send, or the source of a receive once it
// has matched (AnySource before).
func (r *Request) Peer() int { return r.peer }

// Tag returns the tag of a send, or of the matched message for a receive.
func (r *Request) Tag() int { return r.tag }

// Len returns the length of the message: the sender's, for a receive that
// has matched (it may exceed Cap(), in which case the receive reports
// ErrTruncated).
func (r *Request) Len() int { return r.msgLen }

// Cap returns how many bytes a receive can hold: len(Buf()), or the sum of
// the lengths of Iov()'s entries.
func (r *Request) Cap() int { return r.room }

// ViaLMT reports whether the request's current message was handed to the
// LMT (so that LMTData describes it, not an earlier message).
func (r *Request) ViaLMT() bool { return r.viaLMT }

// Buf returns the user buffer of a request started by Isend or Irecv, or
// the base buffer of one started by IsendType or IrecvType (see Type);
// nil for one started by Isendv or Irecvv (see Iov).
func (r *Request) Buf() []byte { return r.buf[0] }

// Iov returns the request's payload as an iovec list, whichever call
// started it: the caller's own list for Isendv and Irecvv (the same slice,
// entries in message order, zero-length ones included), a one-entry list
// holding Buf() for Isend and Irecv. An LMT hands it to its backend as is,
// so that scattered buffers move without being packed. The one-entry list
// lives in the request: asking for it allocates nothing. A typed request
// (Type not nil) has no list: nil.
func (r *Request) Iov() [][]byte {
	if r.vec {
		return r.iov
	}
	return r.buf[:]
}

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

// start resets r for a new operation, keeping only LMTData. Clearing the
// struct and then setting fields saves about 30 instructions per call over
// assigning a composite literal, which the compiler builds in a temporary
// and copies (callgrind on BenchmarkSendRecvInstructions).
func (r *Request) start(ep *Endpoint, op reqOp, peer, tag int) {
	keep := r.LMTData
	*r = Request{}
	r.LMTData, r.ep, r.op, r.state, r.peer, r.tag = keep, ep, op, statePending, peer, tag
}

// deliver writes data, the next piece of the message, into r's buffer or
// list where the previous piece ended; what does not fit is dropped, and
// nothing is written past any buffer.
func (r *Request) deliver(data []byte) {
	if r.vec {
		r.scatter(data)
		return
	}
	r.n += memcopy.Copy(r.buf[0][r.n:], data)
}

// scatter is deliver for a list or a type.
func (r *Request) scatter(data []byte) {
	if r.typ != nil {
		r.n += r.walkType(r.n, data, true)
		return
	}
	var k int
	r.cur, r.curOff, k = walkIov(r.iov, r.cur, r.curOff, data, true)
	r.n += k
}

// gather copies the next len(dst) bytes of a list or typed send, from
// byte r.sent on, into dst (a cell or fastbox).
func (r *Request) gather(dst []byte) {
	if r.typ != nil {
		r.walkType(r.sent, dst, false)
		return
	}
	r.cur, r.curOff, _ = walkIov(r.iov, r.cur, r.curOff, dst, false)
}

// walkIov copies between p and iov from entry i, offset off on, into the
// entries when in is set and out of them otherwise, until p or the list
// runs out; zero-length and finished entries are stepped over without a
// copy. It returns the position reached and the bytes copied.
func walkIov(iov [][]byte, i, off int, p []byte, in bool) (int, int, int) {
	moved := 0
	for len(p) > 0 && i < len(iov) {
		e := iov[i]
		if off >= len(e) {
			i, off = i+1, 0
			continue
		}
		var k int
		if in {
			k = memcopy.Copy(e[off:], p)
		} else {
			k = memcopy.Copy(p, e[off:])
		}
		off += k
		moved += k
		p = p[k:]
	}
	return i, off, moved
}

func iovLen(iov [][]byte) int {
	n := 0
	for _, b := range iov {
		n += len(b)
	}
	return n
}
