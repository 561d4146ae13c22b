package lmt

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// StartSend starts sending the message held in iov (zero-length entries are
// fine) to rank dst and writes the RTS into rts, returning its length. The
// RTS must reach dst's StartRecv with the message's match information. The
// buffers belong to the Engine until the transfer completes. backend forces
// a backend ("" chooses the first available of Config.Prefer).
func (e *Engine) StartSend(dst int, iov [][]byte, backend string, rts []byte) (*Transfer, int, error) {
	return e.startSend(dst, iov, nil, backend, rts)
}

// startSend is StartSend of iov, or of the description in d when not nil.
func (e *Engine) startSend(dst int, iov [][]byte, d *typed, backend string, rts []byte) (*Transfer, int, error) {
	if e.closed {
		return nil, 0, ErrClosed
	}
	if dst < 0 || dst >= e.cfg.Size || dst == e.cfg.Rank {
		return nil, 0, fmt.Errorf("lmt: destination rank %d is not a peer (job of %d, self %d)", dst, e.cfg.Size, e.cfg.Rank)
	}
	if err := e.peers[dst].gone; err != nil {
		return nil, 0, err
	}
	if len(rts) < hdrLen {
		return nil, 0, fmt.Errorf("lmt: RTS buffer of %d bytes, need at least %d", len(rts), hdrLen)
	}
	t := e.newTransfer(dst, Sender, iov)
	if d != nil {
		t.setTyped(d)
	}
	t.started = monotonic()
	t.moveStart = t.started
	t.msgLen = t.bufLen()
	t.length = t.msgLen
	s, err := e.chooseSend(t, backend, len(rts)-hdrLen)
	if err != nil {
		e.drop(t)
		return nil, 0, err
	}
	t.setChannel(&s.chans[dst]) // a typed sender packs its small blocks here
	n, err := t.flow.sendRTS(e, t, rts[hdrLen:])
	if err != nil {
		e.drop(t)
		return nil, 0, err
	}
	e.register(t)
	putHeader(rts, pktRTS, s.id, 0, n, t.id, 0, t.msgLen)
	e.goLive(t)
	return t, hdrLen + n, nil
}

// chooseSend picks the backend of a send: the forced one, or the first of
// the preference list that works with the peer and whose handle, if the
// RTS carries one, fits in room bytes. A typed send looks at the stream
// backends only when no other one takes it (see [Datatyped]).
func (e *Engine) chooseSend(t *Transfer, backend string, room int) (*backendSlot, error) {
	if backend != "" {
		s := e.slot(backend)
		if s == nil {
			return nil, fmt.Errorf("lmt: no backend %q (have %v)", backend, Backends())
		}
		if err := e.check(&s.chans[t.peer]); err != nil {
			return nil, err
		}
		if t.needsDatatypes() && !s.caps.has(capDatatypes) {
			return nil, fmt.Errorf("lmt: backend %s does not take a datatype description (the CMA and stream backends do: lmt.Datatyped)", backend)
		}
		if s.kind.handleInRTS() && !fitsHandle(t, room-s.offer, e.cfg.MaxSegments) {
			return nil, e.noHandleRoom(t, backend, room-s.offer)
		}
		return s, nil
	}
	// The first refusal gives the reason, one for this kind of peer
	// before another: a check's error (kept by the channel), or the
	// first backend whose handle did not fit, put into words only if
	// no backend takes t (a typed send skipping cma on its way to
	// cma-write allocates nothing).
	var first error
	var roomless *backendSlot
	for pass := range passes(t) {
		for _, s := range e.prefer {
			if !s.takes(t, pass) {
				continue
			}
			replace := roomless == nil && (first == nil || errors.Is(first, errMisplaced))
			err := e.check(&s.chans[t.peer])
			switch {
			case err == nil && s.kind.handleInRTS() && !fitsHandle(t, room-s.offer, e.cfg.MaxSegments):
				if replace {
					roomless, first = s, nil
				}
			case err == nil:
				return s, nil
			case replace:
				first = err
			}
		}
	}
	if roomless != nil {
		first = e.noHandleRoom(t, roomless.name, room-roomless.offer)
	}
	if first == nil {
		return nil, fmt.Errorf("lmt: no backend of %v takes a datatype description to rank %d with a %d-byte handle room (the CMA and stream backends do: lmt.Datatyped)", e.cfg.Prefer, t.peer, room)
	}
	return nil, fmt.Errorf("lmt: no backend available for rank %d: %w", t.peer, first)
}

// noHandleRoom says why t's handle does not fit the room the RTS leaves
// backend: its description's encoding, or its segments.
func (e *Engine) noHandleRoom(t *Transfer, backend string, room int) error {
	if t.Typed() {
		return fmt.Errorf("lmt: backend %s: the %d-block description needs a %d-byte handle, %d RTS bytes", backend, t.dt.local.Blocks(), typedHandleLen(t), room)
	}
	return fmt.Errorf("lmt: backend %s: %d segments do not fit its handle (max %d, %d RTS bytes)", backend, nonEmpty(t.iov), e.cfg.MaxSegments, room)
}

func fitsHandle(t *Transfer, room, maxSegs int) bool {
	if t.dt.local != nil {
		return typedHandleLen(t) <= room
	}
	n := nonEmpty(t.iov)
	return n <= maxSegs && segHandleLen(n) <= room
}

// StartRecv starts receiving, into iov, the message whose RTS (from rank src)
// matched. rts is only read during the call.
func (e *Engine) StartRecv(src int, rts []byte, iov [][]byte) (*Transfer, error) {
	return e.startRecv(src, rts, iov, nil)
}

// startRecv is StartRecv into iov, or into the description in d when not nil.
func (e *Engine) startRecv(src int, rts []byte, iov [][]byte, d *typed) (*Transfer, error) {
	if e.closed {
		return nil, ErrClosed
	}
	if src < 0 || src >= e.cfg.Size || src == e.cfg.Rank {
		return nil, fmt.Errorf("lmt: source rank %d is not a peer", src)
	}
	var h header
	payload, err := parseHeader(rts, &h, src)
	if err != nil {
		return nil, err
	}
	if h.typ != pktRTS {
		return nil, fmt.Errorf("lmt: StartRecv given a %s packet, not an RTS", h.typ)
	}
	t := e.newTransfer(src, Receiver, iov)
	if d != nil {
		t.setTyped(d)
	}
	t.started = monotonic()
	t.moveStart = t.started
	t.peerID = h.src
	t.msgLen = h.length
	t.length = min(h.length, t.bufLen())
	e.register(t)
	e.goLive(t)
	if err := e.peers[src].gone; err != nil {
		t.setChannel(e.channelOf(h.kind, src))
		e.complete(t, err)
		return t, nil
	}
	if e.settle(t, h.kind, payload) {
		t.flow.matched(e, t)
	}
	return t, nil
}

// settle puts a receiver on the backend the RTS named or, when that one
// cannot serve here, on a fallback that needs no handle from the sender,
// and reports whether t goes on (false: it failed). The receiver has the
// last word: its CTS names the backend it settled on. Why the named one
// cannot serve is put into words only when no fallback can either: a
// refusal that a fallback answers is a message's normal path (a typed
// receive of a description no CTS holds), which allocates nothing.
func (e *Engine) settle(t *Transfer, kind uint8, handle []byte) bool {
	ch := e.channelOf(kind, t.peer)
	why := e.refusal(t, ch)
	var refused error
	switch {
	case why == servable && ch.slot.kind.handleInRTS():
		if refused = ch.slot.b.SetPeerHandle(t, handle); refused != nil && !isUnavailable(refused) {
			t.setChannel(ch)
			e.fail(t, refused)
			return false
		}
		// An *Unavailable: usable in general, not with this handle.
	case why == servable && t.Typed() && ch.slot.kind == Stream:
		// The blocks in place if the CTS can name them (see takes).
		if in := e.fallbackIn(t, 0); in != nil {
			ch = in
		}
	case why == unregistered || why == unusable:
		// A refusal may only say that the peer died (CMA's ESRCH).
		if err := t.CheckPeer(); err != nil {
			e.PeerFailed(t.peer, err)
			return false
		}
	}
	if why != servable || refused != nil {
		fb := e.fallback(t)
		if fb == nil {
			if refused == nil {
				refused = e.refusalError(t, ch, kind, why)
			}
			t.setChannel(e.channelOf(kind, t.peer))
			e.fail(t, fmt.Errorf("lmt: no fallback among %v: %w", e.cfg.Prefer, refused))
			return false
		}
		ch = fb
	}
	t.setChannel(ch)
	return true
}

// refusal is why a receiver cannot use the backend of the RTS, as settle
// finds it.
type refusal uint8

const (
	servable     refusal = iota
	unregistered         // no backend has the RTS's id here
	unusable             // its Check refused
	noDatatypes          // t is typed, the backend takes no description
	noCTSHandle          // t's handle does not fit the backend's CTS
)

// refusal says whether channel ch (nil: not registered) can carry
// receiver t, and if not why, without an allocation.
func (e *Engine) refusal(t *Transfer, ch *channel) refusal {
	switch {
	case ch == nil:
		return unregistered
	case e.check(ch) != nil:
		return unusable
	case t.Typed() && !ch.slot.caps.has(capReceivesTyped):
		return noDatatypes
	case ch.slot.kind.handleInCTS() && !fitsHandle(t, e.ctsRoom(), e.cfg.MaxSegments):
		return noCTSHandle
	}
	return servable
}

// ctsRoom is what a CTS holds of a receiver's handle, header included.
func (e *Engine) ctsRoom() int { return hdrLen + segHandleLen(e.cfg.MaxSegments) }

// refusalError puts refusal why of backend id kind (channel ch) for t
// into words.
func (e *Engine) refusalError(t *Transfer, ch *channel, kind uint8, why refusal) error {
	switch {
	case why == unregistered:
		return fmt.Errorf("lmt: rank %d chose backend id %d, not registered here", t.peer, kind)
	case why == unusable:
		return e.check(ch)
	case why == noDatatypes:
		return fmt.Errorf("lmt: backend %s does not take a datatype description", ch.slot.name)
	case t.Typed():
		return e.noCTSRoom(t, ch.slot.name, e.ctsRoom())
	}
	return fmt.Errorf("lmt: %d receive segments do not fit a %s handle (max %d)", nonEmpty(t.iov), ch.slot.name, e.cfg.MaxSegments)
}

// fallback finds a backend for a receiver that cannot use the sender's:
// one whose sender needs nothing but the CTS, whose CTS holds this side's
// handle if it carries one. A typed receiver takes one that moves its
// blocks in place (cma-write, its description in the CTS) before a stream
// one, which needs no description at all: a description too long for a
// CTS still receives, through the channel.
func (e *Engine) fallback(t *Transfer) *channel {
	for pass := range passes(t) {
		if ch := e.fallbackIn(t, pass); ch != nil {
			return ch
		}
	}
	return nil
}

// fallbackIn is fallback's pass p over the preference list (see takes).
func (e *Engine) fallbackIn(t *Transfer, pass int) *channel {
	for _, s := range e.prefer {
		if s.kind.handleInRTS() || !s.takes(t, pass) || s.kind == Push && !fitsHandle(t, segHandleLen(e.cfg.MaxSegments), e.cfg.MaxSegments) {
			continue
		}
		if ch := &s.chans[t.peer]; e.check(ch) == nil {
			return ch
		}
	}
	return nil
}

// noCTSRoom is why typed receiver t cannot name its description to the
// sender of backend, in a CTS of room bytes. It is the transfer's error
// only when no fallback took it: then no stream backend is preferred
// and usable, so the fix names them.
func (e *Engine) noCTSRoom(t *Transfer, backend string, room int) error {
	var streams []string
	for _, id := range identities {
		if id.Flow == Stream && !id.Remote {
			streams = append(streams, id.Name)
		}
	}
	return &Unavailable{Backend: backend, Peer: t.peer,
		Reason: fmt.Sprintf("the %d-block receive description needs a %d-byte handle, a CTS has room for %d", t.dt.local.Blocks(), typedHandleLen(t), room),
		Fix:    fmt.Sprintf("put a stream backend (%s) in Config.Prefer: it takes a description of any length; or receive into fewer blocks", strings.Join(streams, ", "))}
}

// HandleControl takes a packet the Engine of rank src sent through Control.
func (e *Engine) HandleControl(src int, pkt []byte) error {
	var h header
	payload, err := parseHeader(pkt, &h, src)
	if err != nil {
		return err
	}
	e.packets++
	t := e.lookup(h.dst)
	if t == nil || t.peer != src {
		return nil // late packet for a transfer that already failed
	}
	switch h.typ {
	case pktCTS:
		return e.onCTS(t, &h, payload)
	case pktDone:
		if h.status != statusOK {
			e.complete(t, &RemoteError{Rank: src, Msg: string(payload)})
			return nil
		}
		if h.length > t.msgLen || int64(h.src) < 0 {
			err := doneCorrupt(t, &h)
			e.fail(t, err)
			return err
		}
		if t.side == Sender && h.src != 0 {
			t.stats.Moving = time.Duration(h.src) // see sendDone
		}
		t.flow.done(e, t, h.length, time.Duration(h.src))
		return nil
	}
	return fmt.Errorf("lmt: unexpected %s packet from rank %d", h.typ, src)
}

// doneCorrupt names what is wrong with a successful DONE for t: it says
// more bytes moved than the message holds, or a negative time.
func doneCorrupt(t *Transfer, h *header) error {
	if h.length > t.msgLen {
		return Corrupt(t.peer, "DONE length", "%d bytes moved, the message has %d", h.length, t.msgLen)
	}
	return Corrupt(t.peer, "DONE time", "%d ns, negative", int64(h.src))
}

// onCTS takes a receiver's CTS: its id, the length it accepts, and the
// backend it settled on, which may differ from the one the RTS named (a
// pull sender then learns that the receiver could not pull). The flow of
// that backend goes on from there.
func (e *Engine) onCTS(t *Transfer, h *header, handle []byte) error {
	if t.side == Sender && t.ch.slot.copier != nil && (t.state == stCopied || t.state == stHanded) {
		// Its user may hold the send complete already: no second flow
		// may take it over (and complete it again). The receiver's
		// transfer ends with this failure.
		e.fail(t, fmt.Errorf("lmt: rank %d cannot take %s (it answered with backend id %d): the job's ranks must register the same backends", t.peer, t.ch.slot.name, h.kind))
		return nil
	}
	if t.side != Sender || !(t.state == stWaitCTS || t.state == stWaitDone && t.ch.slot.kind == Pull) {
		return fmt.Errorf("lmt: unexpected CTS from rank %d for transfer in state %d", t.peer, t.state)
	}
	t.peerID = h.src
	t.length = min(t.length, h.length)
	same := h.kind == t.ch.slot.id
	if !same {
		ch := e.channelOf(h.kind, t.peer)
		if ch == nil || ch.slot.kind.handleInRTS() || t.Typed() && !ch.slot.caps.has(capDatatypes) || e.check(ch) != nil {
			e.fail(t, fmt.Errorf("lmt: rank %d asked for backend id %d, unusable here", t.peer, h.kind))
			return nil
		}
		old, oldFlow := t.ch, t.flow
		if old.slot.copier == nil {
			old.slot.release(t)
		}
		t.setChannel(ch)
		oldFlow.leave(e, t, old, t.state)
	}
	t.flow.cts(e, t, handle, same)
	return nil
}

// truncation is the error a completed receive reports when the message was
// longer than its buffers.
func (e *Engine) truncation(t *Transfer) error {
	if t.side == Receiver && t.msgLen > t.length {
		return &TruncationError{Len: t.msgLen, Cap: t.length}
	}
	return nil
}

func isUnavailable(err error) bool {
	var u *Unavailable
	return errors.As(err, &u)
}
