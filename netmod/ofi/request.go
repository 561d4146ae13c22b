//go:build ofi

package ofi

// #include "shim.h"
import "C"

import (
	"context"
	"errors"
	"runtime"
	"unsafe"

	"github.com/knemesis/knemesis/internal/await"
	"golang.org/x/sys/unix"
)

// Request is one operation in flight; the caller owns it (var r Request),
// so that posting allocates nothing. It may be reused once done.
type Request struct {
	Len int             // payload bytes moved (a receive: the message's, header excluded)
	Tag uint64          // the received message's tag
	Hdr [HeaderMax]byte // the received message's header, Config.HeaderSize bytes
	// Src is where the received message came from, as the provider
	// says (FI_SOURCE): the Addr of an inserted peer, or UnknownAddr
	// for a sender never inserted, or when the endpoint does not get
	// sources (Endpoint.Sources). It is the address the sender declared, not
	// proof of who sent it: tcp;ofi_rxm takes the peer's word for it.
	Src   Addr
	err   error
	peer  Addr
	state uint8
}

const (
	reqIdle uint8 = iota
	reqPending
	reqDone
)

// Done reports whether the request has completed (successfully or not).
func (r *Request) Done() bool { return r.state == reqDone }

// Err is the request's outcome once Done.
func (r *Request) Err() error { return r.err }

type opKind uint8

const (
	opSend opKind = iota + 1
	opRecv
	opRead
)

var opNames = [...]string{opSend: "send", opRecv: "receive", opRead: "read"}

// slot is the Go side of one C kn_slot: the request it serves and the pins
// of the Go buffers libfabric holds meanwhile.
type slot struct {
	req  *Request // nil once its request gave up (see abandon)
	pin  runtime.Pinner
	cap  int // bytes the operation's buffers hold, header excluded
	op   opKind
	busy bool
	// The arguments of the post, kept for a retry from the backlog.
	peer        Addr
	tag, ignore uint64
	raddr, key  uint64
}

// take gives r a free slot for an operation of kind op with peer.
func (e *Endpoint) take(r *Request, op opKind, peer Addr) (int32, *C.struct_kn_slot, error) {
	if e.closed {
		return 0, nil, ErrClosed
	}
	if r.state == reqPending {
		return 0, nil, ErrRequestInUse
	}
	if peer != AnyAddr && uint64(peer) >= uint64(len(e.peers)) {
		return 0, nil, errorf(ErrInvalidArg, "address %d was never inserted (%d peers)", peer, len(e.peers))
	}
	if len(e.free) == 0 {
		return 0, nil, errorf(ErrNoSlot, "all %d slots are in flight (Config.Slots)", len(e.slots))
	}
	i := e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	s := &e.slots[i]
	s.req, s.op, s.cap, s.busy, s.peer = r, op, 0, true, peer
	r.state, r.err, r.peer, r.Len, r.Tag, r.Src = reqPending, nil, peer, 0, 0, UnknownAddr
	return i, e.cslot(i), nil
}

func (e *Endpoint) cslot(i int32) *C.struct_kn_slot {
	return (*C.struct_kn_slot)(unsafe.Add(unsafe.Pointer(e.c.slots), uintptr(i)*C.sizeof_struct_kn_slot))
}

// setIov points the C slot's iovec entries from first on at the non-empty
// buffers of data, pinning those in Go memory, and returns the entry count.
func (e *Endpoint) setIov(s *slot, cs *C.struct_kn_slot, first int, data [][]byte) int {
	n := first
	for _, b := range data {
		if len(b) == 0 {
			continue
		}
		p := unsafe.Pointer(unsafe.SliceData(b))
		s.pin.Pin(p)
		setIovec(cs, n, p, len(b))
		s.cap += len(b)
		n++
	}
	cs.niov = C.uint32_t(n)
	return n
}

// setIovec writes entry n of the C slot's iovec list without a write
// barrier. cs is C memory, and the entry's previous base may point to a Go
// buffer freed since its operation completed (and unpinned it): a pointer
// store would hand that stale value to the garbage collector's barrier,
// which aborts the process on it ("found bad pointer in Go heap").
func setIovec(cs *C.struct_kn_slot, n int, base unsafe.Pointer, size int) {
	*(*uintptr)(unsafe.Pointer(&cs.iov[n].iov_base)) = uintptr(base)
	cs.iov[n].iov_len = C.size_t(size)
}

// finish completes slot i's request with n payload bytes and err, and
// frees the slot.
func (e *Endpoint) finish(i int32, n int, tag uint64, err error) {
	s := &e.slots[i]
	s.pin.Unpin()
	if r := s.req; r != nil {
		if s.op == opRecv && e.c != nil && err == nil {
			h := e.cfg.HeaderSize
			copy(r.Hdr[:h], unsafe.Slice((*byte)(unsafe.Pointer(&e.cslot(i).hdr[0])), h))
		}
		if err != nil {
			err = e.peerError(s.op, r.peer, err)
		}
		r.Len, r.Tag, r.err, r.state = n, tag, err, reqDone
	}
	s.req, s.busy = nil, false
	if e.c != nil {
		e.free = append(e.free, i)
	}
}

func (e *Endpoint) peerError(op opKind, peer Addr, err error) error {
	pe := &PeerError{Peer: "any peer", Address: "FI_ADDR_UNSPEC", Op: opNames[op], Err: err}
	if peer != AnyAddr {
		pe.Peer, pe.Address = e.peers[peer].label, e.peers[peer].address
	}
	return pe
}

// Wait polls until r completes and returns its outcome. When the endpoint
// sees no completion at all for Config.PeerTimeout, r is cancelled and
// fails with ErrTimeout naming its peer: a peer that died without its
// connection failing (a dead host, a cut cable) never completes anything.
// A wait whose endpoint completes anything, for r or not, is not failed,
// however long it takes: it is the one wait loop (package internal/await),
// failing on lack of progress.
func (e *Endpoint) Wait(r *Request) error {
	if r.state != reqPending {
		return r.err
	}
	l := await.Loop{Stall: e.cfg.PeerTimeout, Every: 64}
	err := l.Until(context.Background(), (*driving)(e), (*requestDone)(r))
	if se := (*await.StallError)(nil); errors.As(err, &se) {
		e.abandon(r, errorf(ErrTimeout, "nothing completed for %v", e.cfg.PeerTimeout))
		return r.err
	}
	if err != nil {
		return err
	}
	return r.err
}

// requestDone is a Request as the wait loop's condition.
type requestDone Request

func (r *requestDone) Done() (bool, error) { return r.state != reqPending, nil }

// driving is an Endpoint as the wait loop's Driver: a round is a Poll,
// progress is a completion, and idling yields the CPU after
// spinBeforeYield idle polls. The provider's connections are its
// liveness: a lost peer's operations complete in error.
type driving Endpoint

// spinBeforeYield is how many polls in a row that completed nothing a
// Wait makes before it yields the CPU between polls.
const spinBeforeYield = 1024

func (d *driving) Advance() error {
	n, err := (*Endpoint)(d).Poll()
	d.completed += uint64(n)
	return err
}

func (d *driving) Mark() uint64 { return d.completed }
func (d *driving) Live() error  { return nil }

func (d *driving) Idle(n int) error {
	if n >= spinBeforeYield {
		_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
	return nil
}

// abandon fails r with err. Its operation is cancelled; when the provider
// cannot take it back, its buffers stay pinned and the slot busy until the
// operation completes or the endpoint closes.
func (e *Endpoint) abandon(r *Request, err error) {
	i := e.slotOf(r)
	if i < 0 {
		return
	}
	op := e.slots[i].op
	if e.backlog.remove(i) {
		e.finish(i, 0, 0, err)
		return
	}
	C.kn_cancel(e.c, e.cslot(i))
	for range 1000 {
		if _, perr := e.Poll(); perr != nil || r.state != reqPending {
			break
		}
	}
	if r.state == reqPending {
		e.slots[i].req = nil
		r.err, r.state = e.peerError(op, r.peer, err), reqDone
		return
	}
	if r.err != nil {
		r.err = e.peerError(op, r.peer, err)
	}
}

func (e *Endpoint) slotOf(r *Request) int32 {
	for i := range e.slots {
		if e.slots[i].req == r {
			return int32(i)
		}
	}
	return -1
}
