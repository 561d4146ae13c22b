package coll

import (
	"errors"
	"strconv"
	"strings"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
)

// A collective runs as a schedule: rounds of transfers, each round's sends
// and receives posted together, then, once all of them have completed
// and every received header has been checked, the round's local work (a
// fold, a copy) and the next round. Blocking and nonblocking forms run the
// same schedule; the blocking one waits on its request at once.

// xfer is one message of a round, to or from a rank of the communicator.
type xfer struct {
	peer int // rank in the communicator
	send bool
	buf  []byte // payload: the caller's memory, or scratch
	hdr  [hdrSize]byte
	iov  [2][]byte
	req  nemesis.Request
}

type round struct {
	xfers  []xfer
	before func()               // local work as the round starts (a rank's copy to itself)
	ready  func() (bool, error) // besides the transfers, what the round waits for (shared lines)
	after  func() error         // local work once the transfers are done
}

func (rd *round) send(peer int, buf []byte) {
	rd.xfers = append(rd.xfers, xfer{peer: peer, send: true, buf: buf})
}

func (rd *round) recv(peer int, buf []byte) {
	rd.xfers = append(rd.xfers, xfer{peer: peer, buf: buf})
}

// Request is a nonblocking collective. Wait or Test completes it; the
// buffers passed to the call belong to the collective until then. Any
// Wait or Test on a communicator's endpoint advances every collective
// outstanding on it, so collectives on different communicators may be
// waited for in any order.
type Request struct {
	c      *Comm
	seq    uint32
	coll   uint8
	el     elem
	op     uint8
	rounds []round
	cur    int
	posted bool
	done   bool
	err    error
	// notices sent to the other ranks when this rank failed it.
	notices []nemesis.Request
	notice  [hdrSize]byte
	probe   [hdrSize]byte
	viaShm  bool // runs on the communicator's shared lines (shm.go)
}

func (q *Request) round() *round {
	q.rounds = append(q.rounds, round{})
	return &q.rounds[len(q.rounds)-1]
}

// Done reports whether the collective has completed, without progressing
// it.
func (q *Request) Done() bool { return q.done }

// Wait blocks until the collective completes and returns its error.
func (q *Request) Wait() error {
	if q.done {
		return q.err
	}
	lib := q.c.lib
	err := lib.ep.WaitUntil(func() (bool, error) {
		lib.progress()
		return q.done, nil
	})
	if err != nil && !q.done {
		q.fail(-1, err)
	}
	return q.err
}

// Test progresses communication once and reports whether the collective
// has completed, with its error.
func (q *Request) Test() (bool, error) {
	if !q.done {
		if err := q.c.lib.ep.Poll(); err != nil {
			q.fail(-1, err)
		}
		q.c.lib.progress()
	}
	return q.done, q.err
}

// WaitAll waits for every request and returns the first error (all are
// waited for, whatever fails).
func WaitAll(reqs ...*Request) error {
	var first error
	for _, q := range reqs {
		if err := q.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// step advances q as far as it goes without waiting.
func (q *Request) step() {
	for !q.done {
		if q.cur == len(q.rounds) {
			q.finish(nil)
			return
		}
		rd := &q.rounds[q.cur]
		if !q.posted {
			q.posted = true
			if rd.before != nil {
				rd.before()
			}
			if err := q.post(rd); err != nil {
				return
			}
		}
		for i := range rd.xfers {
			if !rd.xfers[i].req.Done() {
				return
			}
		}
		for i := range rd.xfers {
			if !q.complete(&rd.xfers[i]) {
				return
			}
		}
		if rd.ready != nil {
			ok, err := rd.ready()
			if err != nil {
				q.fail(-1, err)
				return
			}
			if !ok {
				return
			}
			rd.ready = nil
		}
		if rd.after != nil {
			if err := rd.after(); err != nil {
				q.fail(-1, err)
				return
			}
		}
		q.cur++
		q.posted = false
	}
}

// post starts the round's receives, then its sends.
func (q *Request) post(rd *round) error {
	ep, tag := q.c.lib.ep, collTag(q.c.cid, q.seq)
	for pass := range 2 {
		for i := range rd.xfers {
			x := &rd.xfers[i]
			if x.send != (pass == 1) {
				continue
			}
			x.iov = [2][]byte{x.hdr[:], x.buf}
			var err error
			if x.send {
				h := hdr{seq: q.seq, coll: q.coll, elem: q.el.kind, op: q.op, bytes: uint64(len(x.buf))}
				h.put(x.hdr[:])
				err = ep.IsendvLib(&x.req, q.c.members[x.peer], tag, x.iov[:])
			} else {
				err = ep.IrecvvLib(&x.req, q.c.members[x.peer], tag, x.iov[:])
			}
			if err != nil {
				q.fail(x.peer, err)
				return err
			}
		}
	}
	return nil
}

// complete checks a finished transfer: its error, and for a receive the
// header and length against this rank's call.
func (q *Request) complete(x *xfer) bool {
	_, err := q.c.lib.ep.Test(&x.req)
	if x.send {
		if err != nil {
			q.fail(x.peer, err)
			return false
		}
		return true
	}
	if err != nil && !errors.Is(err, nemesis.ErrTruncated) {
		q.fail(x.peer, err)
		return false
	}
	st := x.req.Status()
	if st.Count < hdrSize {
		q.fail(x.peer, &MismatchError{"payload bytes", "a message of " + strconv.Itoa(st.Len) + " bytes in all, shorter than a header", strconv.Itoa(len(x.buf))})
		return false
	}
	if err := q.check(getHdr(x.hdr[:]), st.Len, len(x.buf)); err != nil {
		q.fail(x.peer, err)
		return false
	}
	return true
}

func (q *Request) finish(err error) {
	q.done, q.err = true, err
	q.c.pending--
	q.c.lib.drop(q)
}

// fail ends q with err, which concerns peer (a rank of the communicator,
// or -1), breaks the communicator, and tells the other ranks, so that
// those waiting on this rank, directly or through others, fail too
// instead of waiting for ever.
func (q *Request) fail(peer int, err error) {
	if q.done {
		return
	}
	c := q.c
	origin, cause := c.members[c.rank], causeError
	if w, crashed, ok := deadRank(err); ok {
		origin, cause = w, causeExit
		if crashed {
			cause = causeCrash
		}
	}
	var ae *AbortError
	var de *PeerDataError
	switch {
	case errors.As(err, &ae):
		origin, cause = ae.Origin, ae.cause
	case errors.As(err, &de):
		origin, cause = de.Rank, causePeerData
	case errors.Is(err, ErrMismatch), errors.Is(err, ErrInvalidArg):
		cause = causeMismatch
	}
	e := &Error{Op: collName(q.coll), Seq: q.seq, Comm: c.cid, Rank: c.rank, Peer: -1, WorldPeer: -1, Origin: origin, Err: err}
	if peer < 0 && cause != causeError && cause != causeMismatch {
		peer = c.rankOf(origin)
	}
	if peer >= 0 {
		e.Peer, e.WorldPeer = peer, c.members[peer]
	}
	q.finish(e)
	if c.broken == nil {
		c.broken = e
	}
	q.tell(origin, cause)
}

// deadRank finds in err the job rank whose death it reports, from the
// endpoint or from the LMT, and whether that rank crashed (rather than
// closed its endpoint).
func deadRank(err error) (rank int, crashed, ok bool) {
	var pe *nemesis.PeerError
	var le *lmt.PeerError
	switch {
	case errors.As(err, &pe):
		return pe.Rank, crashedPeer(pe), true
	case errors.As(err, &le):
		return le.Rank, true, true
	}
	return -1, false, false
}

// tell sends every other rank of the communicator a failure notice for q,
// naming the job rank where the failure began and what happened there.
func (q *Request) tell(origin int, cause uint8) {
	c := q.c
	h := hdr{seq: q.seq, coll: q.coll, elem: q.el.kind, op: q.op, notice: 1, origin: int32(origin), cause: cause}
	h.put(q.notice[:])
	ep := c.lib.ep
	q.notices = make([]nemesis.Request, len(c.members))
	for i, w := range c.members {
		if i == c.rank || ep.PeerFailure(w) != nil {
			continue
		}
		// Best effort: a rank that cannot be told is gone or will
		// find out from its own transfers.
		_ = ep.IsendvLib(&q.notices[i], w, noticeTag(c.cid, q.seq), [][]byte{q.notice[:]})
	}
}

// watch looks for what would make q wait for ever: a failure notice from
// another rank, or a rank of the communicator that crashed.
func (q *Request) watch() {
	c := q.c
	ep := c.lib.ep
	tag := noticeTag(c.cid, q.seq)
	st, ok, err := ep.IprobeLib(nemesis.AnySource, tag)
	if err != nil {
		q.fail(-1, err)
		return
	}
	if ok {
		var r nemesis.Request
		if err := ep.IrecvvLib(&r, st.Source, tag, [][]byte{q.probe[:]}); err != nil {
			q.fail(-1, err)
			return
		}
		if !r.Done() || r.Status().Count != hdrSize {
			// Not a notice this package sends: a peer that writes
			// garbage on the communicator's tags.
			q.fail(c.rankOf(st.Source), &MismatchError{"failure notice bytes", strconv.Itoa(st.Len), strconv.Itoa(hdrSize)})
			return
		}
		h := getHdr(q.probe[:])
		q.fail(c.rankOf(st.Source), &AbortError{From: st.Source, Origin: int(h.origin), Cause: causeName(h.cause), cause: h.cause})
		return
	}
	if q.viaShm {
		// A rank that took the message path (it passed more than a
		// slot's bytes) sends where this one never receives.
		st, ok, err := ep.IprobeLib(nemesis.AnySource, collTag(c.cid, q.seq))
		if err == nil && ok {
			q.failMessaged(st)
			return
		}
	}
	for i, w := range c.members {
		var pe *nemesis.PeerError
		if i != c.rank && errors.As(ep.PeerFailure(w), &pe) && crashedPeer(pe) {
			q.fail(i, pe)
			return
		}
	}
}

// failMessaged fails q, which runs in shared memory, for the message a
// rank sent with q's tag: that rank called another operation, or one
// whose size takes messages. The message's header says which, when it
// came whole (its payload is dropped: the communicator is broken).
func (q *Request) failMessaged(st nemesis.Status) {
	c := q.c
	err := error(&MismatchError{"payload bytes", "over " + strconv.Itoa(shmSlot) + " (sent as messages)", "at most " + strconv.Itoa(shmSlot) + " (in shared memory)"})
	var r nemesis.Request
	if c.lib.ep.IrecvvLib(&r, st.Source, st.Tag, [][]byte{q.probe[:]}) == nil && r.Done() && r.Status().Count == hdrSize {
		h := getHdr(q.probe[:])
		if h.notice == 0 && (h.coll != q.coll || h.elem != q.el.kind || h.op != q.op) {
			err = q.check(h, st.Len, st.Len-hdrSize)
		}
	}
	q.fail(c.rankOf(st.Source), err)
}

// crashedPeer tells a rank that died without closing its endpoint from one
// that closed it after its part: only the first dooms a collective that
// waits on it through others. peerfault.Error says it in its reason
// alone (nemesis liveness.go, netmod.go); a field there would be firmer.
func crashedPeer(pe *nemesis.PeerError) bool {
	return !strings.Contains(pe.Reason, "closed its endpoint")
}
