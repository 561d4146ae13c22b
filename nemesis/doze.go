package nemesis

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Dozing: a blocked call that has spun (SpinBeforeYield Polls) and then
// yielded yieldsBeforeDoze times without anything moving goes to sleep in
// futex(2) on the sleep word of its bell, so that a job with far more ranks
// than cores, most of them waiting, leaves the cores to the ranks that
// work. Whoever gives the rank something to do wakes it: a sender after
// enqueueing a cell on its receive queue or filling a fastbox to it, a
// receiver after returning one of its cells. The waker reads the sleep word
// (a line that holds the bell too, and stays in its cache while the rank
// is awake) and makes the system call only when the rank sleeps.
//
// The sleeper sets its word with a SWAP (a full barrier), then polls once
// more and checks that no enqueue is in flight on its receive queue (or,
// if it waits for cells, on its free queue), whose tail the enqueuer
// SWAPped before it read the word: a cell enqueued before the word was set
// is seen here, one enqueued after finds the word set. A fastbox is filled
// with a release store, which the filler's read of the word may pass: such
// a message, like payload an LMT moves without a packet, is seen when the
// sleep times out. The timeout starts at dozeMin and grows fourfold at
// each doze up to dozeMax (dozeMaxLMT while an LMT has transfers in
// flight, whose payload moves without waking anyone; dozeMaxNet for a rank
// with peers on other nodes, whose packets ring no bell), and every
// wake-up checks the peers' liveness when it is due: a dozing rank notices
// a dead peer within dozeMax. A second is long for a message lost in that
// race, which takes a fastbox store and the sleeper's announcement within
// some nanoseconds of each other, but it keeps what 190 dozing ranks cost
// to a wake-up and a poll(2) over their pidfds each per second
// (TestJob192, docs/performance.md, "Scaling nemesis to a whole node").
// With an LMT that does not count what it moves (no LMTMeter) a blocked
// call cannot tell a transfer in motion from an idle one, and never dozes.
const (
	yieldsBeforeDoze = 256
	dozeMin          = 50 * time.Microsecond
	dozeMax          = time.Second
	dozeMaxLMT       = time.Millisecond
	// dozeMaxNet caps the doze of a rank with peers on other nodes: no
	// bell rings for a network packet, so a packet that arrives during
	// a nap waits for its end. A waiter dozes only after spinning and
	// yielding for much longer than a network round trip.
	dozeMaxNet = time.Millisecond
)

// futex(2) operations (linux/futex.h), on a word shared between processes.
const (
	futexWait = 0
	futexWake = 1
)

// doze sleeps until woken or the waiter's current timeout passes.
func (ep *Endpoint) doze(idle int) error {
	n := idle - (SpinBeforeYield + yieldsBeforeDoze)
	nap := dozeMin << min(2*n, 20)
	if limit := ep.dozeLimit(); nap > limit {
		nap = limit
	}
	ep.sleep.Store(1)
	mark := ep.progressMark()
	if err := ep.Poll(); err != nil {
		ep.sleep.Store(0)
		return err
	}
	if ep.progressMark() != mark || ep.enqueueInFlight() {
		// The wait loop sees the mark moved, and starts its spin over.
		ep.sleep.Store(0)
		return nil
	}
	ts := unix.NsecToTimespec(int64(nap))
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(ep.sleep)), futexWait, 1, uintptr(unsafe.Pointer(&ts)), 0, 0)
	ep.sleep.Store(0)
	ep.stats.Dozes++
	if errno == 0 {
		ep.stats.Woken++
	}
	return ep.livenessDue()
}

func (ep *Endpoint) canDoze() bool {
	return ep.lmt == nil || ep.lmtMeter != nil
}

// dozeLimit: an LMT with transfers in flight moves payload without waking
// anyone, so the doze stays short; an idle one (LMTIdler) does not. Were
// every idle rank of a job with an LMT to wake each millisecond, 62 idle
// ranks of a 64-rank job would wake 62,000 times a second, on the cores
// the working pair needs.
func (ep *Endpoint) dozeLimit() time.Duration {
	limit := dozeMax
	if ep.lmt != nil {
		if i, ok := ep.lmt.(LMTIdler); !ok || !i.Idle() {
			limit = dozeMaxLMT
		}
	}
	if ep.net != nil {
		limit = min(limit, dozeMaxNet)
	}
	if ep.arenaOut.busy != 0 {
		// A receiver's store into a completion slot, like a fastbox's,
		// may pass its read of the sleep word.
		limit = min(limit, dozeMaxLMT)
	}
	return limit
}

// enqueueInFlight reports whether a peer has begun an enqueue on a queue
// this rank is waiting on: its tail is set while its head still reads
// empty (a plain store the enqueuer makes after its SWAP).
func (ep *Endpoint) enqueueInFlight() bool {
	if ep.recvQ.sh.tail.Load() != 0 {
		return true
	}
	return ep.sendsOut > 0 && ep.freeQ.sh.tail.Load() != 0
}

// wake wakes the rank if it dozes. Inlined into every send and cell
// return: a load of a line that stays in this core's cache while the rank
// is awake.
func (p *peer) wake() {
	if p.sleep.Load() != 0 {
		p.wakeSlow()
	}
}

//go:noinline
func (p *peer) wakeSlow() {
	if p.sleep.Swap(0) != 0 {
		_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(p.sleep)), futexWake, 1, 0, 0, 0)
	}
}
