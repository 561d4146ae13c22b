package nemesis

// The optimization window, after Aumage, Brunet, Furmento and Namyst,
// "NewMadeleine: a Fast Communication Scheduling Engine for High
// Performance Networks" (CAC 2007): sends that cannot leave at once wait,
// per destination, in the window (the destination's send queue), and when
// the channel frees a Strategy builds the next packets from what waits
// there, instead of each send taking its own packet in the order it came.
//
// The window costs nothing while it is empty: a send that finds the
// channel free leaves by the path it always took (fastbox, cells, RTS),
// with no strategy call, no lock, no map. Sends wait in the window when
//
//   - the window to their destination already holds sends (order);
//   - no cell is free (every strategy);
//   - the fastbox their sequence number names still holds an earlier
//     message and the strategy aggregates messages of their size: they
//     then wait for the next Poll to leave packed with their followers
//     rather than take a cell each;
//   - that fastbox is full and the send is alone in its window: it waits,
//     a bounded number of Polls, for the box to empty (hold.go);
//   - the endpoint is inside a batch (Batch, until Flush).
//
// Every Poll (and so Test and Wait) drains the windows it can, batch or
// not: a batch gathers the sends started between two polls, never holds
// one that something waits on.

import "fmt"

// A Strategy builds packets to one destination from the sends waiting in
// its window, as a NewMadeleine strategy builds the next packet when a
// NIC becomes idle. Strategies are values of this package (Straightforward,
// Aggregate); SetStrategy chooses one per endpoint. The receiver needs no
// setting: every endpoint understands every packet a strategy builds.
//
// Contract of schedule: it takes requests from the front of the window, in
// order, never reordering two sends to the same destination; each one it
// takes has its payload in cells or a fastbox, or was handed to the LMT,
// and is removed from the window and counted out of ep.sendsOut (failed or
// finished sends are completed). It stops, leaving the rest in the window,
// when no packet can be built now; it returns only errors fatal to the
// endpoint.
type Strategy interface {
	fmt.Stringer
	schedule(ep *Endpoint, dst int) error
	// holdMax is the longest message that waits in the window for a busy
	// fastbox rather than take a cell of its own (-1: none waits).
	holdMax(ep *Endpoint) int
}

// Straightforward sends every message in its own packet, in order: the
// fastbox when free, else cells, else it waits for cells to come back.
// It is the default.
var Straightforward Strategy = straightforward{}

type straightforward struct{}

func (straightforward) String() string        { return "straightforward" }
func (straightforward) holdMax(*Endpoint) int { return -1 }
func (straightforward) schedule(ep *Endpoint, dst int) error {
	q := &ep.sendq[dst]
	for r := q.Front(); r != nil; r = q.Front() {
		if !ep.sendFront(r) {
			break
		}
	}
	return ep.fatal
}

// sendFront tries to put r, the front of its window, on its way, and
// takes it out of the window when it went (or failed). It reports false
// when r must wait.
func (ep *Endpoint) sendFront(r *Request) bool {
	res, err := ep.trySend(r)
	if res == sendBlocked && err == nil {
		return false
	}
	ep.leaveWindow(r)
	if err != nil {
		ep.finish(r, 0, err)
	} else if res == sendDone {
		ep.finish(r, r.msgLen, nil)
	}
	return true
}

// leaveWindow takes r out of its destination's window.
func (ep *Endpoint) leaveWindow(r *Request) {
	ep.sendq[r.peer].Remove(&r.links)
	ep.sendsOut--
}

// SetStrategy chooses how packets are built from the windows from now on;
// sends already waiting are scheduled by the new strategy. nil is
// Straightforward.
func (ep *Endpoint) SetStrategy(s Strategy) error {
	if ep.closed {
		return ErrClosed
	}
	if s == nil {
		s = Straightforward
	}
	ep.strategy = s
	ep.hold = s.holdMax(ep)
	return nil
}

// Strategy returns the strategy in use.
func (ep *Endpoint) Strategy() Strategy { return ep.strategy }

// Batch makes the sends started from now until Flush wait in the window,
// so that the strategy schedules them together (MPI_Startall of a set of
// persistent sends, a halo exchange posting its faces). Poll, Test and
// Wait still drain the windows: a batch never holds a send that something
// waits on.
func (ep *Endpoint) Batch() { ep.batching = true }

// Flush ends a batch and puts what waits in the windows on its way, as far
// as cells allow (the rest leaves at later polls).
func (ep *Endpoint) Flush() error {
	ep.batching = false
	if ep.fatal != nil {
		return ep.fatal
	}
	if ep.sendsOut == 0 {
		return nil
	}
	return ep.releaseHeld()
}
