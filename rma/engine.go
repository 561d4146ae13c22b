package rma

import (
	"runtime"

	"fmt"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/memcopy"
	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/nemesis"
)

// engine is the one-sided layer of one endpoint: the endpoint's
// active-message handler, shared by every window created over it. Like the
// endpoint it belongs to one goroutine.
type engine struct {
	ep         *nemesis.Endpoint
	rank, size int
	wins       []*Window // by creation number; nil once freed
	coll       []collPkt // collective packets not consumed yet

	// tx[t] holds the operations toward t with work left (a copy to make,
	// packets to send), in the order they were started; rx[t] those
	// waiting for t's reply. txN counts the operations in all tx lists.
	tx, rx []opList
	txN    int
	// owed[s] holds the replies this rank owes rank s, in order.
	owed  []replyQueue
	owedN int
	dead  []error // per rank, once found gone
	nDead int

	pkt []byte // one outgoing packet
	// ringWins: the allocated windows, whose notification rings every
	// Progress looks at. moved counts the steps made without a packet
	// (nemesis.AMMeter): notifications taken from the rings, operations
	// advanced by Progress.
	ringWins []*Window
	moved    uint64

	knem       *knem.Device // opened at the first Expose that may use it
	knemStatus *knem.StatusArray
	// knemFeatures: what the driver announced (region attach).
	knemFeatures knem.Features
	knemErr      error
	knemOpen     bool

	cmaLocal  [iovMax]unix.Iovec
	cmaRemote [1]unix.RemoteIovec
}

// engineOf returns the endpoint's engine, installing one at the first
// window.
func engineOf(ep *nemesis.Endpoint) (*engine, error) {
	switch h := ep.AM().(type) {
	case *engine:
		return h, nil
	case nil:
	default:
		return nil, errorf(ErrInvalidArg, "the endpoint already has an active-message handler (%T)", h)
	}
	n := ep.Size()
	e := &engine{
		ep: ep, rank: ep.Rank(), size: n,
		tx: make([]opList, n), rx: make([]opList, n),
		owed: make([]replyQueue, n), dead: make([]error, n),
		pkt: make([]byte, ep.MaxAM()),
	}
	if err := ep.SetAM(e); err != nil {
		return nil, err
	}
	return e, nil
}

// maxData is the payload one active message carries.
func (e *engine) maxData() int { return len(e.pkt) - hdrLen }

// send sends the packet of header h and data (at most maxData bytes),
// without blocking: false when no cell is free right now.
func (e *engine) send(dst int, h *header, data []byte) (bool, error) {
	h.n = uint32(len(data))
	h.put(e.pkt)
	if len(data) > 0 {
		memcopy.Copy(e.pkt[hdrLen:], data)
	}
	return e.ep.SendAM(dst, e.pkt[:h.size()])
}

// HandleAM implements nemesis.AMHandler.
func (e *engine) HandleAM(src int, pkt []byte) error {
	var h header
	data, ok := h.parse(pkt)
	if !ok {
		return errorf(ErrCorrupt, "%d-byte packet from rank %d", len(pkt), src)
	}
	switch h.typ {
	case pktColl:
		if len(data) > collLen {
			return errorf(ErrCorrupt, "collective packet of %d bytes from rank %d", len(data), src)
		}
		c := collPkt{win: h.win, phase: h.a, src: src}
		copy(c.data[:], data)
		e.coll = append(e.coll, c)
		return nil
	case pktAck, pktGetData, pktAtomicRes:
		return e.reply(src, &h, data)
	}
	w := e.window(h.win)
	if w == nil {
		return errorf(ErrCorrupt, "packet of type %d from rank %d for window %d, which does not exist here", h.typ, src, h.win)
	}
	return w.serve(src, &h, data)
}

// window returns the window of creation number id, nil if there is none.
func (e *engine) window(id uint32) *Window {
	if uint64(id) >= uint64(len(e.wins)) {
		return nil
	}
	return e.wins[id]
}

// Progress implements nemesis.AMHandler: it advances the operations
// waiting to send and the replies owed.
func (e *engine) Progress() error {
	if e.txN > 0 {
		for t := range e.tx {
			if e.tx[t].head != nil {
				e.pump(t)
			}
		}
	}
	if e.owedN > 0 {
		for s := range e.owed {
			if err := e.flushOwed(s); err != nil {
				return err
			}
		}
	}
	return e.drainRings()
}

// Moved implements nemesis.AMMeter: notifications come through the rings
// of allocated windows in no packet, and an operation Progress advances
// (a PutNotify that found room, a CMA chunk) may be the one a blocked
// call waits for.
func (e *engine) Moved() uint64 { return e.moved }

// PeerFailed implements nemesis.AMHandler: every operation aimed at rank
// fails, naming it, and nothing more is owed to it.
func (e *engine) PeerFailed(rank int, err error) {
	if e.dead[rank] != nil {
		return
	}
	e.dead[rank] = err
	e.nDead++
	terr := targetGone(rank, err)
	for op := e.tx[rank].pop(); op != nil; op = e.tx[rank].pop() {
		e.txN--
		if op.async {
			// The driver may still write the caller's buffers: wait
			// for the copy, which fails with the region, so that they
			// are the caller's again when the failure is reported.
			for {
				st, err := e.knemStatus.Status(op.slot)
				if err != nil || st != knem.StatusPending {
					break
				}
				runtime.Gosched()
			}
			_ = e.knemStatus.Free(op.slot) // the slot came from Alloc: in range
			op.async = false
		}
		op.w.finish(op, terr)
	}
	for op := e.rx[rank].pop(); op != nil; op = e.rx[rank].pop() {
		e.ep.Expect(rank, -1)
		op.w.finish(op, terr)
	}
	e.owedN -= e.owed[rank].len()
	e.owed[rank].reset()
}

// start puts op on its way: at once when nothing is ahead of it toward its
// target (a small put on a shared window completes here, never queued),
// else behind what is.
func (e *engine) start(op *Op) {
	t := op.target
	if err := e.dead[t]; err != nil {
		op.w.finish(op, targetGone(t, err))
		return
	}
	q := &e.tx[t]
	if q.head == nil {
		more, err := op.w.step(op)
		if !more || err != nil {
			e.stepped(op, err)
			return
		}
	}
	q.push(op)
	e.txN++
}

// pump advances the operations toward t in order, until one cannot go on
// right now (no cell free; a CMA transfer's next chunk waits for the next
// Progress so that one long put does not hold up the others).
func (e *engine) pump(t int) {
	q := &e.tx[t]
	for op := q.head; op != nil; op = q.head {
		moved, notify := op.moved, op.notify
		more, err := op.w.step(op)
		if more && err == nil {
			if op.moved != moved || op.notify != notify {
				e.moved++
			}
			return
		}
		e.moved++
		q.pop()
		e.txN--
		e.stepped(op, err)
	}
}

// stepped takes op, whose last step ended with err, to its next state:
// done, or waiting for its target's reply.
func (e *engine) stepped(op *Op, err error) {
	switch {
	case err != nil:
		op.w.finish(op, err)
	case op.awaitsReply():
		e.rx[op.target].push(op)
		e.ep.Expect(op.target, +1)
	default:
		op.w.finish(op, nil)
	}
}

// reply handles what a target sends back: acknowledgments of puts, get
// data and atomic results, in the order of the requests.
func (e *engine) reply(src int, h *header, data []byte) error {
	q := &e.rx[src]
	switch h.typ {
	case pktAck:
		for range h.a {
			op := q.pop()
			if op == nil || op.kind != opPut {
				return errorf(ErrCorrupt, "rank %d acknowledged a put that was not sent", src)
			}
			e.ep.Expect(src, -1)
			op.w.finish(op, nil)
		}
	case pktGetData:
		op := q.head
		if op == nil || op.kind != opGet || len(data) > op.n-op.moved {
			return errorf(ErrCorrupt, "rank %d sent %d bytes of get data unasked", src, len(data))
		}
		scatter(op.iov, op.moved, data)
		op.moved += len(data)
		if op.moved == op.n {
			q.pop()
			e.ep.Expect(src, -1)
			op.w.finish(op, nil)
		}
	case pktAtomicRes:
		op := q.pop()
		if op == nil || op.kind != opAtomic {
			return errorf(ErrCorrupt, "rank %d sent an atomic result unasked", src)
		}
		op.value = h.a
		e.ep.Expect(src, -1)
		op.w.finish(op, nil)
	}
	return nil
}

// owe queues a reply to src and sends what it can now.
func (e *engine) owe(src int, r reply) error {
	if e.owed[src].push(r) {
		e.owedN++
	}
	return e.flushOwed(src)
}

// flushOwed sends the replies owed to s until a packet finds no cell.
func (e *engine) flushOwed(s int) error {
	q := &e.owed[s]
	for q.len() > 0 {
		r := q.front()
		h := header{typ: r.typ, win: r.win, off: uint64(r.off), a: r.val}
		var data []byte
		if r.typ == pktGetData {
			w := e.window(r.win)
			if w == nil {
				return fmt.Errorf("rma: get from window %d, freed while owing rank %d data", r.win, s)
			}
			k := min(r.n-r.sent, e.maxData())
			data = w.local[r.off+r.sent : r.off+r.sent+k]
		}
		ok, err := e.send(s, &h, data)
		if err != nil || !ok {
			return err
		}
		r.sent += len(data)
		if r.typ == pktGetData && r.sent < r.n {
			continue
		}
		q.pop()
		e.owedN--
	}
	return nil
}

// waitSend sends one packet, waiting for a cell when none is free.
func (e *engine) waitSend(dst int, h *header, data []byte) error {
	return e.ep.WaitUntil(func() (bool, error) {
		if err := e.dead[dst]; err != nil {
			return false, targetGone(dst, err)
		}
		return e.send(dst, h, data)
	})
}
