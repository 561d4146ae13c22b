package nemesis

import (
	"fmt"
	"slices"
	"time"

	"github.com/knemesis/knemesis/peerfault"
	"golang.org/x/sys/unix"
)

// SpinBeforeYield is how many Polls in a row that moved nothing a blocked
// call makes before it yields. It spins on Poll for a while (a message
// usually arrives within a few microseconds), then yields at every round,
// to other goroutines and to other processes, so that a job with more ranks
// than cores still progresses: the rank it waits for may need this core.
//
// The spin outlasts the copies a rank typically waits for: 4096 idle
// Polls take about as long as a 64 KiB to 512 KiB copy (the C reference
// spins 4096 pauses, MPICH 1000 polls). A shorter spin yields while the
// peer's copy is still running, and a message that lands during a
// sched_yield waits for it to return (docs/performance.md, nemesis).
// Layers that wait on an endpoint by their own loop (package attach) spin as
// long. A call whose LMT transfers wait on a pipe sleeps in poll(2) on it
// instead (see LMTPoller).
const SpinBeforeYield = 4096

// livenessDue checks the peers if LivenessInterval has passed since the
// last check.
func (ep *Endpoint) livenessDue() error {
	now := time.Now()
	if now.Before(ep.live.next) {
		return nil
	}
	ep.live.next = now.Add(ep.opts.LivenessInterval)
	return ep.checkPeers()
}

// liveness watches the peers' processes: with a pidfd each where the kernel
// has them (one poll(2) for all), else with kill(pid, 0). Only blocked calls
// look, so the cost is one system call per LivenessInterval of waiting,
// nothing per message.
type liveness struct {
	fds   []unix.PollFd
	ranks []int // rank of fds[i]
	next  time.Time
}

func (l *liveness) open(ep *Endpoint) error {
	for i, p := range ep.peers {
		if i == ep.rank || p.net {
			continue // a remote rank's liveness is the module's (probeRemote)
		}
		fd, err := unix.PidfdOpen(p.pid, 0)
		if err != nil {
			if err == unix.ESRCH {
				ep.peerFailed(i)
				continue
			}
			l.close() // fall back to kill(pid, 0) for all
			return nil
		}
		l.fds = append(l.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		l.ranks = append(l.ranks, i)
	}
	return nil
}

func (l *liveness) close() {
	for _, f := range l.fds {
		if f.Fd >= 0 {
			unix.Close(int(f.Fd))
		}
	}
	l.fds, l.ranks = nil, nil
}

// checkPeers finds ranks that died since the last look and fails what
// depends on them.
func (ep *Endpoint) checkPeers() error {
	if err := ep.reapGone(); err != nil {
		return err
	}
	if ep.net != nil {
		if err := ep.probeRemote(); err != nil {
			return ep.fail(err)
		}
	}
	var gone []int
	if ep.live.ranks != nil {
		if _, err := unix.Poll(ep.live.fds, 0); err != nil && err != unix.EINTR {
			return fmt.Errorf("nemesis: polling peer pidfds: %w", err)
		}
		for i := range ep.live.fds {
			f := &ep.live.fds[i]
			if f.Fd >= 0 && f.Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0 {
				gone = append(gone, ep.live.ranks[i])
				unix.Close(int(f.Fd))
				f.Fd = -1 // poll(2) ignores negative descriptors
			}
		}
	} else {
		for i, p := range ep.peers {
			if i != ep.rank && !p.net && p.dead == nil && !processAlive(p.pid) {
				gone = append(gone, i)
			}
		}
	}
	if len(gone) == 0 {
		return nil
	}
	// Deliver what the dead ranks sent before dying, then fail the rest.
	for range 4 {
		if err := ep.Poll(); err != nil {
			return err
		}
	}
	for _, rank := range gone {
		ep.peerFailed(rank)
	}
	return ep.reapGone()
}

// reapGone gives back the cells stuck in the receive queues of ranks that
// are gone: without this, a rank whose cells all sat in a dead peer's queue
// could never send again. A gone rank's queue keeps a single consumer: the
// first survivor to claim it in the shared reaper field. It drains the queue
// at every liveness check, so cells that senders enqueued before noticing
// the death come home too.
func (ep *Endpoint) reapGone() error {
	if ep.nGone == 0 {
		return nil
	}
	me := int32(ep.rank + 1)
	for i := range ep.peers {
		if ep.peers[i].dead == nil || ep.peers[i].distrusted() {
			continue // alive, or failed for a corrupt value and still alive
		}
		pb := ep.seg.proc(i)
		if !pb.reaper.CompareAndSwap(0, me) && pb.reaper.Load() != me {
			continue
		}
		q := queue{sh: &pb.recv}
		for {
			off, c, err := q.dequeue(ep.seg)
			if err != nil {
				return ep.fail(err)
			}
			if off == 0 {
				break
			}
			owner := ep.seg.cellOwner(off) // where it lies, not what it says
			if err := ep.peers[owner].freeQ.enqueue(ep.seg, off, c); err != nil {
				return ep.fail(err)
			}
			ep.peers[owner].wake()
			ep.stats.Reaped++
		}
	}
	return nil
}

// peerGone builds the error for rank's disappearance. A rank that closed its
// endpoint first left normally; one that did not, crashed.
func (ep *Endpoint) peerGone(rank int) error {
	how := "died without closing its endpoint"
	if ep.seg.proc(rank).closed.Load() != 0 {
		how = "closed its endpoint and exited"
	}
	return peerfault.Dead(rank, int(ep.peers[rank].pid), how, nil)
}

// peerFailed fails every request that waits on rank. Wildcard receives fail
// too when rank crashed (the message they wait for may have been its), but
// not when it closed normally, nor while another rank could still send.
func (ep *Endpoint) peerFailed(rank int) {
	if ep.peers[rank].dead != nil {
		return
	}
	ep.drainFboxes(rank)
	ep.failPeer(rank, ep.peerGone(rank), ep.seg.proc(rank).closed.Load() == 0)
}

// drainFboxes delivers what a gone rank left in its fastboxes to this
// rank, next in its sequence, before its receives fail: Poll reads a
// rank's fastboxes only when a receive names it (and in its periodic
// scan), so the last message of a rank that died before this one posted
// its receive would otherwise be dropped with the rank. A corrupt box
// fails the endpoint, as it would in Poll.
func (ep *Endpoint) drainFboxes(rank int) {
	for range fboxSlots + lineSlots {
		if ok, err := ep.pollFbox(rank); !ok || err != nil {
			return
		}
	}
}

// failPeer fails every request that waits on rank with err.
func (ep *Endpoint) failPeer(rank int, err error, crashed bool) {
	p := &ep.peers[rank]
	p.dead = err
	ep.nGone++
	if crashed && ep.crashed == nil {
		ep.crashed = err
	}
	ep.dropNetRTS(rank)
	q := &ep.sendq[rank]
	for r := q.Front(); r != nil; r = q.Front() {
		q.Remove(&r.links)
		ep.sendsOut--
		if r.netOut > 0 {
			r.sent, r.err = r.msgLen, err // its last packet's report finishes it
			continue
		}
		ep.finish(r, 0, err)
	}
	if i := slices.Index(ep.sendDsts, int32(rank)); i >= 0 {
		ep.dropSendDst(i)
	}
	ep.failArenaSends(rank, err)
	if a := &p.asm; a.req != nil {
		ep.finish(a.req, a.req.n, err)
		*a = assembly{}
	} else if a.ux != nil {
		ep.unexp.Remove(&a.ux.links)
		ep.freeUnexpected(a.ux)
		*a = assembly{}
	}
	allGone := ep.allDead() != nil
	for r := ep.posted.Front(); r != nil; {
		next := r.links.Next()
		if r.peer == rank || r.peer == AnySource && (crashed || allGone) {
			ep.posted.Remove(&r.links)
			ep.expect(r.peer, -1)
			ep.finish(r, 0, err)
		}
		r = next
	}
	if ep.lmt != nil {
		ep.lmt.PeerFailed(rank, err)
	}
	if ep.am != nil {
		ep.am.PeerFailed(rank, err)
	}
}

// unreachable says why no message from src (or from anyone, for AnySource)
// can arrive any more. After a rank crashed, wildcard receives fail (as
// with ULFM's MPI_ERR_PROC_FAILED): the message they wait for may have been
// the dead rank's.
func (ep *Endpoint) unreachable(src int) error {
	if src != AnySource {
		return ep.peers[src].dead
	}
	if ep.crashed != nil {
		return ep.crashed
	}
	return ep.allDead()
}

// allDead returns an error when no other rank is left to send anything.
func (ep *Endpoint) allDead() error {
	var last error
	for i := range ep.peers {
		if i == ep.rank {
			continue
		}
		if ep.peers[i].dead == nil {
			return nil
		}
		last = ep.peers[i].dead
	}
	return last
}
