//go:build ofi

package ofi

// #include "shim.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// Poll drives the provider's progress (manual data progress) and completes
// the requests whose operations finished: up to Config.Batch completions
// per call, read with one fi_cq_read. It returns how many completed. An
// error return means the completion queue itself failed; a failed
// operation fails its request instead.
func (e *Endpoint) Poll() (int, error) {
	if e.closed {
		return 0, ErrClosed
	}
	n := C.kn_poll(e.c)
	switch {
	case n > 0:
		comps := unsafe.Slice(e.c.comp, n)
		var srcs []C.fi_addr_t
		if e.c.source != 0 {
			srcs = unsafe.Slice(e.c.src, n)
		}
		for k := range comps {
			c := &comps[k]
			src := UnknownAddr
			if srcs != nil {
				src = Addr(srcs[k])
			}
			e.complete((*C.struct_kn_slot)(c.op_context), int(c.len), uint64(c.tag), src)
		}
		e.retry()
		return int(n), nil
	case n == 0:
		e.retry()
		return 0, nil
	case n == -C.FI_EAVAIL:
		e.completeErr(&e.c.err)
		e.retry()
		return 1, nil
	}
	return 0, fmt.Errorf("ofi: fi_cq_read: %w", Errno(-n))
}

func (e *Endpoint) complete(cs *C.struct_kn_slot, n int, tag uint64, src Addr) {
	i := int32(cs.index)
	switch e.slots[i].op {
	case opRecv:
		if r := e.slots[i].req; r != nil {
			r.Src = src
		}
		n -= e.cfg.HeaderSize
		if n < 0 {
			e.finish(i, 0, tag, errorf(ErrTruncated, "message of %d bytes is shorter than the %d-byte header", n+e.cfg.HeaderSize, e.cfg.HeaderSize))
			return
		}
	case opSend:
		n = 0
	case opRead:
		n = e.slots[i].cap
	}
	e.finish(i, n, tag, nil)
}

// completeErr fails the operation of an error completion (fi_cq_readerr),
// with libfabric's code and the provider's own words (fi_cq_strerror).
func (e *Endpoint) completeErr(ce *C.struct_fi_cq_err_entry) {
	cs := (*C.struct_kn_slot)(ce.op_context)
	if cs == nil {
		return
	}
	i := int32(cs.index)
	code := Errno(ce.err)
	var err error
	switch code {
	case C.FI_ETRUNC:
		e.finish(i, max(int(ce.len)-e.cfg.HeaderSize, 0), uint64(ce.tag), e.truncated(ce, e.slots[i].cap))
		return
	default:
		var buf [256]C.char
		C.kn_cq_strerror(e.c, &buf[0], C.size_t(len(buf)))
		err = &completionError{code: code, prov: Errno(ce.prov_errno), detail: C.GoString(&buf[0])}
	}
	e.finish(i, 0, uint64(ce.tag), err)
}

// truncated says how long the message was, where the provider says so:
// tcp;ofi_rxm (libfabric 1.17) reports neither len nor olen.
func (e *Endpoint) truncated(ce *C.struct_fi_cq_err_entry, capacity int) error {
	if ce.olen == 0 {
		return errorf(ErrTruncated, "message longer than the receive buffers of %d bytes (%s does not say by how much)", capacity, e.provider)
	}
	msg := int(ce.len) + int(ce.olen) - e.cfg.HeaderSize
	return errorf(ErrTruncated, "message of %d bytes, receive buffers of %d", msg, capacity)
}

// completionError is a failed completion: libfabric's code and the
// provider's detail, which for a broken connection matches ErrPeerLost.
type completionError struct {
	code   Errno
	prov   Errno // the provider's own code (prov_errno): tcp gives an errno
	detail string
}

// Is: a completion canceled because the connection broke (tcp;ofi_rxm
// cancels a read so, saying ENOTCONN in prov_errno) is a lost peer too.
func (c *completionError) Is(target error) bool {
	return target == ErrPeerLost && c.prov > 0 && c.prov.Is(ErrPeerLost)
}

func (c *completionError) Error() string {
	if c.detail == "" {
		return c.code.Error()
	}
	return c.code.Error() + ": " + c.detail
}

func (c *completionError) Unwrap() error { return c.code }

// post hands slot i's operation to libfabric, or queues it behind those
// the provider refused for want of resources (-FI_EAGAIN: it wants
// progress, often the peer's, as while a connection is set up): Poll
// retries the backlog in order, so that operations reach the provider in
// the order they were posted. This is poll_send of the Nemesis network
// module. Another error fails the request at once.
func (e *Endpoint) post(i int32) error {
	if e.backlog.n == 0 {
		ret := e.issue(i)
		if ret == 0 {
			return nil
		}
		if ret != -C.FI_EAGAIN {
			r := e.slots[i].req
			e.finish(i, 0, 0, Errno(-ret))
			return r.err
		}
	}
	e.backlog.push(i)
	return nil
}

// retry issues the backlog's operations until the provider refuses one.
func (e *Endpoint) retry() {
	for e.backlog.n > 0 {
		i := e.backlog.front()
		ret := e.issue(i)
		if ret == -C.FI_EAGAIN {
			return
		}
		e.backlog.pop()
		if ret != 0 {
			e.finish(i, 0, 0, Errno(-ret))
		}
	}
}

// issue makes the one cgo call that posts slot i's operation.
func (e *Endpoint) issue(i int32) C.ssize_t {
	s, cs := &e.slots[i], e.cslot(i)
	switch s.op {
	case opSend:
		return C.kn_tsend(e.c, cs, C.fi_addr_t(s.peer), C.uint64_t(s.tag))
	case opRecv:
		return C.kn_trecv(e.c, cs, C.fi_addr_t(s.peer), C.uint64_t(s.tag), C.uint64_t(s.ignore))
	default:
		return C.kn_read(e.c, cs, C.fi_addr_t(s.peer), C.uint64_t(s.raddr), C.uint64_t(s.key))
	}
}

// ring is a FIFO of slot indexes, as long as there are slots.
type ring struct {
	buf     []int32
	head, n int
}

func (q *ring) push(i int32) {
	q.buf[(q.head+q.n)%len(q.buf)] = i
	q.n++
}

func (q *ring) front() int32 { return q.buf[q.head] }

func (q *ring) pop() {
	q.head = (q.head + 1) % len(q.buf)
	q.n--
}

// remove takes i out of the ring, keeping the others' order; it reports
// whether i was there.
func (q *ring) remove(i int32) bool {
	for k := 0; k < q.n; k++ {
		if q.buf[(q.head+k)%len(q.buf)] != i {
			continue
		}
		for ; k < q.n-1; k++ {
			q.buf[(q.head+k)%len(q.buf)] = q.buf[(q.head+k+1)%len(q.buf)]
		}
		q.n--
		return true
	}
	return false
}
