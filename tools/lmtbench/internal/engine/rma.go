package engine

import (
	"fmt"
	"os"

	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/rma"
)

// The one-sided engines measure package rma the way Ben Fredj and Renault
// measure RWAPI ("The Critical's Path of Communication Model Analysis for
// a Performant Implementation of High-speed Interfaces over the Myrinet
// Interconnect", 2006): a message is a remote write with notification
// (put-*: Send is PutNotify into the peer's window, Recv waits for the
// notification, the bytes already in the receive buffer, which is the
// window), or a get (get-*: Send offers the sender's window and waits
// until the peer has fetched it, Recv gets it straight into the receive
// buffer). One engine per mechanism: allocated, knem-attach, knem, cma,
// am. The
// pingpong, bidir and stream modes then are the paper's ping-pong,
// bidirectional ping-pong and burst.

// RecvBufferer is implemented by an Engine whose messages must land in
// memory of its own (a one-sided window): the harness receives into
// RecvBuffer(n) instead of memory of its own.
type RecvBufferer interface {
	RecvBuffer(n int) ([]byte, error)
}

// RMAMechanisms are the mechanisms of the put-* and get-* engines, in
// the order of package rma's table (rma.Mechanisms).
var RMAMechanisms = rmaNames()

func rmaNames() []string {
	var names []string
	for _, m := range rma.Mechanisms() {
		names = append(names, m.String())
	}
	return names
}

func init() {
	for _, op := range []string{"put", "get"} {
		for _, mech := range rma.Mechanisms() {
			m := mech.String()
			register(Backend{
				Name:        op + "-" + m,
				Summary:     fmt.Sprintf("one-sided %s (package rma) through %s", op, rmaSummary[mech]),
				OnRequest:   true,
				Check:       rmaCheck(op+"-"+m, mech),
				SharedBytes: func(int) int { return 0 },
				Open:        func(p Peer) (Engine, error) { return openRMA(p, op == "get", mech) },
			})
		}
	}
}

var rmaSummary = map[rma.Mechanism]string{
	rma.Allocated:  "a window allocated in shared memory (one user copy)",
	rma.KnemAttach: "an exposed window's knem region mapped once (one user copy, no system call)",
	rma.Knem:       "an exposed window's persistent knem region (one kernel copy)",
	rma.CMA:        "process_vm_writev/readv on an exposed window (one kernel copy)",
	rma.AM:         "active messages over the Nemesis queues (three user copies)",
}

func rmaCheck(name string, m rma.Mechanism) func() error {
	return func() error {
		if m != rma.Knem && m != rma.KnemAttach {
			return nil // CMA's checks need the peer: Open reports a refusal
		}
		if _, err := os.Stat(knem.DevicePath); err != nil {
			return &Unavailable{Backend: name, Reason: knem.DevicePath + " missing", Fix: "load the knem module (modprobe knem)"}
		}
		return nil
	}
}

// Tags of the handshakes.
const (
	tagReady = 1 // get: the sender's window holds the message
	tagTaken = 2 // get: the receiver has fetched it
	tagGrant = 3 // put, bidir: the receiver's window may be written
)

type rmaEngine struct {
	ep   *nemesis.Endpoint
	w    *rma.Window
	peer int
	get  bool
	mem  []byte // exposed memory (the window's part), nil when allocated
	op   rma.Op
	sig  rma.Op // the handshake notifications
	// synced: both ranks have passed their first call. The harness writes
	// its receive buffer (the window, for put) before the first message;
	// a peer's put must not land before that.
	synced bool
	alloc  func(int) ([]byte, error) // Peer.Alloc, for the plain buffers
}

func (e *rmaEngine) sync() error {
	if e.synced {
		return nil
	}
	e.synced = true
	return e.w.Fence()
}

func openRMA(p Peer, get bool, m rma.Mechanism) (Engine, error) {
	if p.Proc.Size != 2 {
		return nil, fmt.Errorf("rma: runs between exactly 2 processes, job has %d", p.Proc.Size)
	}
	ep, err := nemesis.JoinProc(p.Proc, nil)
	if err != nil {
		return nil, fmt.Errorf("rma: joining the Nemesis job: %w", err)
	}
	e := &rmaEngine{ep: ep, peer: 1 - p.Proc.Rank, get: get, alloc: p.Alloc}
	if m == rma.Allocated {
		e.w, err = rma.Allocate(ep, p.MaxSize, nil)
	} else {
		e.mem = make([]byte, p.MaxSize)
		e.w, err = rma.Expose(ep, e.mem, &rma.Options{Prefer: []rma.Mechanism{m}})
	}
	if err != nil {
		ep.Close()
		return nil, err
	}
	if r := e.w.Route(e.peer); r.Mechanism != m {
		e.Close()
		u := &Unavailable{Backend: m.String(), Reason: fmt.Sprintf("rank %d reaches rank %d by %v", p.Proc.Rank, e.peer, r.Mechanism)}
		if len(r.Refused) > 0 {
			u.Reason = r.Refused[len(r.Refused)-1].Error()
		}
		return nil, u
	}
	return e, nil
}

// SendBuffer: a get reads the message out of the sender's window.
func (e *rmaEngine) SendBuffer(n int) ([]byte, error) {
	if e.get {
		return e.w.Local()[:n:n], nil
	}
	return plain(e.alloc, n)
}

// RecvBuffer: a put writes the message into the receiver's window.
func (e *rmaEngine) RecvBuffer(n int) ([]byte, error) {
	if e.get {
		return plain(e.alloc, n)
	}
	return e.w.Local()[:n:n], nil
}

func (e *rmaEngine) Send(buf []byte) error {
	if err := e.sync(); err != nil {
		return err
	}
	if e.get {
		return e.offer(buf)
	}
	if err := e.w.PutNotify(&e.op, e.peer, 0, 0, buf); err != nil {
		return err
	}
	return e.w.Wait(&e.op)
}

func (e *rmaEngine) Recv(buf []byte) error {
	if err := e.sync(); err != nil {
		return err
	}
	if e.get {
		return e.fetch(buf)
	}
	_, err := e.w.WaitNotification(e.peer, 0)
	return err
}

// SendRecv: for put, each rank first grants its window to the peer (a
// bare notification each way, as MPI's post and start): in an exchange
// both receive buffers are rewritten by their owners just before, and a
// put must not land before that.
func (e *rmaEngine) SendRecv(out, in []byte) error {
	if err := e.sync(); err != nil {
		return err
	}
	if e.get {
		if err := e.signal(tagReady); err != nil {
			return err
		}
		if err := e.fetch(in); err != nil {
			return err
		}
		_, err := e.w.WaitNotification(e.peer, tagTaken)
		return err
	}
	if err := e.signal(tagGrant); err != nil {
		return err
	}
	if _, err := e.w.WaitNotification(e.peer, tagGrant); err != nil {
		return err
	}
	if err := e.w.PutNotify(&e.op, e.peer, 0, 0, out); err != nil {
		return err
	}
	if _, err := e.w.WaitNotification(e.peer, 0); err != nil {
		return err
	}
	return e.w.Wait(&e.op)
}

// offer tells the peer that buf, at the start of this rank's window, holds
// the message, and waits until it has been fetched.
func (e *rmaEngine) offer(buf []byte) error {
	if err := e.signal(tagReady); err != nil {
		return err
	}
	_, err := e.w.WaitNotification(e.peer, tagTaken)
	return err
}

// fetch waits for the peer's offer, gets the message and says so.
func (e *rmaEngine) fetch(buf []byte) error {
	if _, err := e.w.WaitNotification(e.peer, tagReady); err != nil {
		return err
	}
	if err := e.w.Get(&e.op, e.peer, 0, buf); err != nil {
		return err
	}
	if err := e.w.Wait(&e.op); err != nil {
		return err
	}
	return e.signal(tagTaken)
}

// signal sends a bare notification (a PutNotify of nothing).
func (e *rmaEngine) signal(tag int) error {
	if err := e.w.PutNotify(&e.sig, e.peer, 0, tag, nil); err != nil {
		return err
	}
	return e.w.Wait(&e.sig)
}

func (e *rmaEngine) Close() error {
	err := e.w.Free()
	if cerr := e.ep.Close(); err == nil {
		err = cerr
	}
	return err
}
