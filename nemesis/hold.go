package nemesis

// Holding a small send for its fastbox. A message that fits a fastbox may
// find the box of its sequence number still full: its receiver has not yet
// consumed the message sent fboxSlots before it. Cells are then the
// costliest way to send it: the free-queue dequeue, the receive-queue
// enqueue and the cell's return each move lines between the cores where a
// fastbox moves one, and the receiver's dequeue, slower than a fastbox
// poll, makes it fall further behind. A stream of small sends, each
// waited for as MPI_Send waits, then left mostly by cells, at about half
// the rate of its fastboxes (docs/performance.md, "Holding a small send
// for its fastbox").
//
// So a lone send, one with nothing behind it in its window, waits in the
// window for its box to empty, as a UCX sender waits for room in its
// receiver's FIFO, for up to holdPolls Polls of this endpoint. It takes
// cells if the box is still full by then, and so do the next holdBackoff
// sends to that rank that find their box full: a receiver busy elsewhere
// costs a sender one bounded wait per holdBackoff messages, not one per
// message. A send that queues behind a held one releases it to the cells
// at once, so a burst of nonblocking sends leaves as it did before, by
// fastbox and cells, in order; so does a control packet or an active
// message to the same rank, which must follow it. Flush, which puts a
// batch on its way, and Close hold nothing: a send started and never
// waited for still reaches its receiver as it did by cells. A held send
// moves only when its sender polls: one started before a long computation
// reaches its receiver at the sender's next call, as UCX's pending sends
// do, where a cell would have carried it at once.
//
// holdPolls is far below SpinBeforeYield: a blocked sender gives the held
// send to the cells long before it would hand its CPU away. A receiver
// that polls this sender's fastboxes only in its periodic scan (every 64
// Polls, fastbox.go) may let the wait run out; its sends then go by cells
// as before.
const (
	holdPolls   = 64
	holdBackoff = 256
)

// holdForBox reports whether send r, whose fastbox is full, waits for it
// rather than take cells.
func (ep *Endpoint) holdForBox(r *Request) bool {
	if r.links.Next() != nil || ep.releasing {
		return false
	}
	p := &ep.peers[r.peer]
	if !r.held {
		if p.holdOff > 0 {
			p.holdOff--
			return false
		}
		r.held, r.heldAt = true, ep.polls
	}
	if ep.polls-r.heldAt < holdPolls {
		return true
	}
	p.holdOff = holdBackoff
	return false
}

// releaseFor sends by cells the send held alone in dst's window, so that
// a control packet or an active message to dst, which must follow it,
// need not wait for its fastbox too. Only that send goes: the rest of a
// window may hold an RTS, and the LMT calls this (sendShort) from inside
// its own calls, which must not re-enter it.
func (ep *Endpoint) releaseFor(dst int) {
	r := ep.sendq[dst].Front()
	if r == nil || !r.held || r.links.Next() != nil {
		return
	}
	ep.releasing = true
	ep.sendFront(r)
	ep.releasing = false
}

// releaseHeld schedules every window with no send held for its fastbox.
func (ep *Endpoint) releaseHeld() error {
	ep.releasing = true
	err := ep.progressSends()
	ep.releasing = false
	return err
}
