package nemesis

import (
	"time"

	"github.com/knemesis/knemesis/internal/fastclock"
)

// Holding a small send for its fastbox. A message that fits a fastbox may
// find the box of its sequence number still full: its receiver has not yet
// consumed the message sent fboxSlots before it. Cells are then the
// costliest way to send it: the free-queue dequeue, the receive-queue
// enqueue and the cell's return each move lines between the cores where a
// fastbox moves one, and the receiver's dequeue, slower than a fastbox
// poll, makes it fall further behind. A stream of small sends, each
// waited for as MPI_Send waits, then left mostly by cells, at about half
// the rate of its fastboxes (git log -S "Holding a small send for its
// fastbox" docs/performance.md).
//
// So a lone send, one with nothing behind it in its window, waits in the
// window for its box to empty, as a UCX sender waits for room in its
// receiver's FIFO, for at least holdPolls Polls of this endpoint and at
// least holdTime. It takes cells if the box is still full by then, and so
// do the next holdBackoff sends to that rank that find their box full: a
// receiver busy elsewhere costs a sender one bounded wait per holdBackoff
// messages, not one per message; that back-off ends early once the rank
// is seen consuming the pair's line ring again, since a receiver that
// was late, not busy elsewhere, must not push the next holdBackoff
// messages that find it behind into the cells. A send that queues behind
// a held one releases it to the cells at once, so a burst of nonblocking
// sends leaves as it did before, by fastbox and cells, in order; so does a
// control packet or an active message to the same rank, which must follow
// it. Flush, which puts a batch on its way, and Close hold nothing: a
// send started and never waited for still reaches its receiver as it did
// by cells. A held send moves only when its sender polls: one started before
// a long computation reaches its receiver at the sender's next call, as
// UCX's pending sends do, where a cell would have carried it at once.
//
// The wait is bounded in time as well as in Polls because a Poll that
// finds nothing to do is cheap: holdPolls of them can pass before a
// receiver behind a stream of line records, slowed by a far placement, has
// consumed the lineRelease slots after which it publishes its count
// (linebox.go). Bounded in
// Polls alone, the wait ran out while the receiver was draining the
// window; the send took a cell, the line records behind it in the pair's
// sequence waited for the receiver's slower dequeue of that cell, more
// sends found the ring full, and a stream settled at a rate set by cells
// (git log -S "Eighth wave-2 session" docs/performance.md). holdTime is far longer
// than a draining receiver needs, and far shorter than a sender notices.
//
// A receiver that polls this sender's fastboxes only in its periodic scan
// (every 64 Polls, fastbox.go) may let the wait run out; its sends then go
// by cells as before.
const (
	holdPolls   = 64
	holdTime    = 20 * time.Microsecond
	holdBackoff = 256
)

// holdClock reads the time of holds; tests replace it to hold the time
// still.
var holdClock = fastclock.Nanotime

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
		r.held = true
		p.heldAt, p.heldSince = ep.polls, holdClock()
	}
	if ep.polls-p.heldAt < holdPolls || holdClock()-p.heldSince < int64(holdTime) {
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
