//go:build ofi

package ofi

// #include "shim.h"
import "C"

import "fmt"

// Inbox keeps receives posted on bounce buffers for messages of up to Size
// payload bytes from any peer whose tags match, and hands each arrived
// message to the caller in the order the provider matched them: the
// poll_recv of a Nemesis network module, whose matching (any-source,
// probe, posted order, truncation) is the endpoint's own and not the
// provider's. Messages from one peer come out in the order it sent them,
// as the provider keeps send-after-send order (FI_ORDER_SAS) and the
// receives are matched and delivered in the order they were posted.
//
// The caller owns the Inbox value (var in ofi.Inbox); its buffers are
// allocated once, at Open.
type Inbox struct {
	e           *Endpoint
	reqs        []Request
	bufs        [][]byte // one entry per receive, kept as a one-entry iovec
	iov         [][][]byte
	tag, ignore uint64
	head        int   // the receive matched first among those posted
	broken      error // a receive could not be posted again: the order is lost
}

// Open posts n receives of size bytes on in, for messages whose tag
// matches tag in the bits ignore leaves clear.
func (in *Inbox) Open(e *Endpoint, n, size int, tag, ignore uint64) error {
	if in.e != nil {
		return errorf(ErrInvalidArg, "inbox already open")
	}
	if n < 1 || n > len(e.free) || size < 0 {
		return errorf(ErrInvalidArg, "inbox of %d receives of %d bytes (%d slots free)", n, size, len(e.free))
	}
	mem := make([]byte, n*size)
	in.e, in.tag, in.ignore, in.head, in.broken = e, tag, ignore, 0, nil
	in.reqs, in.bufs, in.iov = make([]Request, n), make([][]byte, n), make([][][]byte, n)
	for i := range n {
		in.bufs[i] = mem[i*size : (i+1)*size : (i+1)*size]
		in.iov[i] = in.bufs[i : i+1]
		if err := in.post(i); err != nil {
			return err
		}
	}
	return nil
}

func (in *Inbox) post(i int) error {
	return in.e.Irecv(&in.reqs[i], AnyAddr, in.tag, in.ignore, in.iov[i])
}

// Drain hands every message that has arrived, in matching order, to
// deliver (its source as Request.Src says, its tag, header and payload,
// valid only during the call) and posts its
// buffer again. Call it after Endpoint.Poll. A receive that failed stops
// Drain with its error, its buffer posted again; an error from deliver
// stops Drain too, the message consumed. A message longer than the
// inbox's buffers (ErrTruncated) is a protocol error: every sender must
// keep within them, as tcp;ofi_rxm (libfabric 1.17) delivers nothing more
// from that peer afterwards.
func (in *Inbox) Drain(deliver func(src Addr, tag uint64, hdr, payload []byte) error) (int, error) {
	if in.broken != nil {
		return 0, in.broken
	}
	n := 0
	for in.reqs[in.head].Done() {
		i := in.head
		r := &in.reqs[i]
		in.head = (in.head + 1) % len(in.reqs)
		var err error
		if r.err == nil {
			err = deliver(r.Src, r.Tag, r.Hdr[:in.e.cfg.HeaderSize], in.bufs[i][:r.Len])
		} else {
			err = r.err
		}
		n++
		if perr := in.post(i); perr != nil {
			in.broken = fmt.Errorf("ofi: inbox cannot post its receive again: %w", perr)
			return n, in.broken
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Close cancels the inbox's receives. What arrived but was not drained is
// dropped.
func (in *Inbox) Close() {
	if in.e == nil || in.e.closed {
		in.e = nil
		return
	}
	for i := range in.reqs {
		if in.reqs[i].state == reqPending {
			in.e.abandon(&in.reqs[i], errorf(ErrCanceled, "inbox closed"))
		}
	}
	in.e = nil
}
