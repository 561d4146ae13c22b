package lmt

// A channel is one backend's link with one peer: whether the backend works
// with that peer, and, for a Stream backend, the scheduling of the
// messages that share its one FIFO or ring. A stream channel carries one
// message at a time in each direction, so the engine decides here who
// reads it, who may fill it before the CTS, and in which order senders
// push:
//
//   - busy and queue: the receiver reads one message at a time, in the
//     order it matched them; the others wait in queue, and the one behind
//     a completed read is granted the channel (grant) and reads from the
//     next Progress on.
//   - early and filled: one sender at a time may fill a tagging channel
//     (Early: the shm ring) before its CTS, the oldest still waiting for
//     it with nothing in the channel yet; filled is the one whose early
//     pieces sit in the channel uncommitted. The ring says which message
//     the receiver skipped in a single word, so only one may.
//   - pushing and turns: senders past their CTS with bytes still to push.
//     Nobody fills early while one pushes, so early pieces always follow
//     committed ones. On an Ordered channel (a pipe, which cannot tell one
//     message's bytes from another's) the receiver grants every matched
//     message at once (grantAhead) and senders push in the order of their
//     CTSs: turns holds them, the first one pushing.
//
// A transfer's own place in this (may it fill? has it pieces in? is it
// pushing?) is read from these fields and its state, never kept twice.
type channel struct {
	slot *backendSlot
	peer int

	checked bool
	refusal error // the backend's Check with this peer, once checked

	busy  *Transfer   // the stream receiver reading the channel
	queue []*Transfer // receivers waiting for it, in match order

	early   *Transfer   // the sender that may fill before its CTS
	filled  *Transfer   // the sender whose early pieces await its CTS
	pushing int         // senders in stQueued or stActive
	turns   []*Transfer // Ordered: those senders in CTS order
}

// enlist gives a new sender the right to fill early if nobody holds it;
// otherwise the holder's CTS passes it on (passEarly), so that a sender
// running ahead of its receiver keeps the channel full.
func (ch *channel) enlist(t *Transfer) {
	if ch.slot.early != nil && t.length > 0 && ch.early == nil {
		ch.early = t
	}
}

// mayFill reports whether Progress should fill t before its CTS.
func (ch *channel) mayFill(t *Transfer) bool { return ch.early == t && t.moved < t.length }

// fill moves the next chunk of the early sender t into the channel, while
// there is room, as long as no committed sender is still pushing and no
// other one's early pieces await their CTS: the receiver finds t's pieces
// after all those it is committed to.
func (ch *channel) fill(e *Engine, t *Transfer) {
	if ch.pushing != 0 || ch.filled != nil && ch.filled != t {
		return
	}
	max := int(min(int64(e.cfg.Chunk), t.length-t.moved))
	n, err := ch.slot.early.Prefill(t, max)
	if err != nil {
		e.fail(t, err)
		return
	}
	if n == 0 {
		return
	}
	ch.filled = t
	e.bytes += uint64(n)
	t.advance(n)
}

// passEarly gives the right to fill before the CTS, when nobody holds it,
// to the oldest sender on ch still waiting for its CTS that has nothing in
// the channel yet: one that lost the right after filling must not add
// pieces behind a later message's. e.live is in start order.
func (ch *channel) passEarly(e *Engine) {
	if ch.slot.early == nil || ch.early != nil {
		return
	}
	for _, t := range e.live {
		if t.side == Sender && t.ch == ch && t.state == stWaitCTS && t.moved == 0 && t.length > 0 {
			ch.early = t
			return
		}
	}
}

// commit takes sender t's CTS. Whoever held the right to fill early loses
// it: if the receiver matched t before the holder, the holder's pieces
// must all lie ahead of t's, and it never fills again (passEarly skips
// senders with pieces in). t's own early pieces count if the receiver
// kept them (same backend, not skipped); otherwise t starts over. t then
// pushes at once, or on an Ordered channel when its turn comes.
func (ch *channel) commit(e *Engine, t *Transfer, same bool) {
	ch.early = nil
	if ch.filled == t {
		ch.filled = nil
	}
	t.state = stQueued
	ch.pushing++
	if ch.slot.caps.has(capOrdered) {
		ch.turns = append(ch.turns, t)
	}
	if t.moved > 0 {
		if same && ch.slot.early != nil && ch.slot.early.Kept(t) {
			t.stats.Early = t.moved
		} else {
			t.rewind()
		}
	}
	if err := ch.slot.b.Start(t); err != nil {
		e.fail(t, err)
		return
	}
	if ch.slot.caps.has(capOrdered) && ch.turns[0] != t {
		return // pushes when the senders whose CTS came first have
	}
	t.state = stActive
	e.finishIfEmpty(t)
}

// pushed is called when sender t leaves stQueued or stActive: its last
// byte is in the channel, or it failed. On an Ordered channel the next
// sender's turn comes: the receiver reads their bytes in the order it
// sent the CTSs, and the control channel keeps that order.
func (ch *channel) pushed(e *Engine, t *Transfer) {
	ch.pushing--
	if !ch.slot.caps.has(capOrdered) {
		return
	}
	q := ch.turns
	i := 0
	for i < len(q) && q[i] != t {
		i++
	}
	if i == len(q) {
		return
	}
	copy(q[i:], q[i+1:])
	q[len(q)-1] = nil
	q = q[:len(q)-1]
	ch.turns = q
	if i == 0 && len(q) > 0 && q[0].state == stQueued {
		q[0].state = stActive
		e.finishIfEmpty(q[0])
	}
}

// leaveSender releases what sender t held: its push, its early pieces,
// its right to fill early (passed on).
func (ch *channel) leaveSender(e *Engine, t *Transfer, prev tstate) {
	if prev == stQueued || prev == stActive {
		ch.pushed(e, t)
	}
	if ch.filled == t {
		ch.filled = nil
	}
	if ch.early == t {
		ch.early = nil
		ch.passEarly(e)
	}
}

// claim gives receiver t the channel, or queues it behind the one reading
// it; on an Ordered channel a queued receiver's CTS leaves at once.
func (ch *channel) claim(e *Engine, t *Transfer) {
	if ch.busy == nil {
		ch.grant(e, t, false)
		return
	}
	t.state = stQueued
	ch.queue = append(ch.queue, t)
	if ch.slot.caps.has(capOrdered) {
		ch.grantAhead(e, t)
	}
}

// grant gives receiver t the channel and tells its sender to go, unless
// grantAhead did (ctsSent).
func (ch *channel) grant(e *Engine, t *Transfer, ctsSent bool) {
	ch.busy = t
	if !ctsSent {
		if err := ch.slot.b.Start(t); err != nil {
			e.fail(t, err)
			return
		}
		e.send(t, pktCTS, 0, 0, t.length)
	}
	t.state = stActive
	e.finishIfEmpty(t)
}

// grantAhead sends the CTS of a receiver queued behind another on an
// Ordered channel. Its sender pushes once the bytes of every earlier CTS
// are in, so they follow those the receiver reads first: the channel never
// runs dry between two messages while a CTS crosses, as it would if the
// CTS left only when the message ahead was read.
func (ch *channel) grantAhead(e *Engine, t *Transfer) {
	if err := ch.slot.b.Start(t); err != nil {
		e.fail(t, err)
		return
	}
	e.send(t, pktCTS, 0, 0, t.length)
}

// leaveReceiver releases what receiver t held: its place in the queue, or
// the channel, which goes to the next in line.
func (ch *channel) leaveReceiver(e *Engine, t *Transfer, prev tstate) {
	if prev == stQueued {
		ch.unqueue(t)
		return
	}
	if ch.busy != t {
		return
	}
	ch.busy = nil
	for len(ch.queue) > 0 && ch.busy == nil {
		next := ch.queue[0]
		ch.unqueue(next)
		// Every queued receiver on an Ordered channel has had its CTS.
		ch.grant(e, next, ch.slot.caps.has(capOrdered))
		// Read in the next Progress, not this one's pass: reading on
		// would empty the channel before any new CTS left, and the
		// sender's copy in and this side's copy out would take turns
		// instead of overlapping.
		next.grantedIn = e.pass
	}
}

func (ch *channel) unqueue(t *Transfer) {
	q := ch.queue
	for i, x := range q {
		if x == t {
			copy(q[i:], q[i+1:])
			q[len(q)-1] = nil
			ch.queue = q[:len(q)-1]
			return
		}
	}
}
