package lmt

import (
	"errors"

	"golang.org/x/sys/unix"
)

// peer is what the Engine knows of one rank's process.
type peer struct {
	pidfd int // -1 until opened
	pid   int
	gone  error
	// exited is the peer's death as an idle transfer found it, before
	// its transfers fail: graceLeft more Progress calls first.
	exited    error
	graceLeft int
}

// idleCheckEvery is how many idle visits a transfer gets between two checks
// that its peer is alive: a poll(2) on a pidfd costs about as much as
// copying a few KiB, so it runs every few hundred microseconds of waiting.
const idleCheckEvery = 4096

func (e *Engine) idle(t *Transfer) {
	if t.state == stDone {
		return
	}
	t.idleVisits++
	if t.idleVisits%idleCheckEvery != 0 {
		return
	}
	if err := e.peerAlive(t.peer); err != nil {
		e.peerExited(t.peer, err)
	}
}

// ExitGrace is how many Progress calls pass between the sight of a peer's
// exit and the failure of its transfers. A peer may send its DONE and
// exit at once: the packet then sits in the control channel while the
// pidfd already says exited, and the poll that precedes each Progress
// (the endpoint's, which the engine does not see) must hand it over
// before a completed transfer is failed. A nemesis endpoint takes, a poll,
// what its fastboxes from a peer hold next and up to 64 cells from its
// queue: with its default 64 cells per rank, two polls hand over all a
// dead peer left; 4 leave room for more. A waiter that sees the exit
// itself (attach) polls as many times before it calls PeerFailed.
const ExitGrace = 4

// peerExited starts rank's grace, once.
func (e *Engine) peerExited(rank int, err error) {
	p := &e.peers[rank]
	if p.exited != nil || p.gone != nil {
		return
	}
	p.exited, p.graceLeft = err, ExitGrace
	e.exiting++
}

// failExited fails the transfers of the peers whose grace ran out.
func (e *Engine) failExited() {
	for rank := range e.peers {
		p := &e.peers[rank]
		if p.exited == nil {
			continue
		}
		if p.graceLeft--; p.graceLeft > 0 {
			continue
		}
		err := p.exited
		p.exited = nil
		e.exiting--
		e.PeerFailed(rank, err)
	}
}

// PeerFailed fails every transfer with rank, whose process is gone, and
// every later one.
func (e *Engine) PeerFailed(rank int, err error) {
	if rank < 0 || rank >= e.cfg.Size {
		return
	}
	var pe *PeerError
	if !errors.As(err, &pe) {
		err = &PeerError{Rank: rank, PID: e.peers[rank].pid, Err: err}
	}
	if e.peers[rank].gone == nil {
		e.peers[rank].gone = err
	}
	if e.peers[rank].exited != nil {
		e.peers[rank].exited = nil // failed now, not after its grace
		e.exiting--
	}
	for _, t := range e.live {
		if t.peer == rank {
			e.abort(t, err)
		}
	}
}

// peerAlive returns a *PeerError when rank's process has exited.
func (e *Engine) peerAlive(rank int) error {
	p := &e.peers[rank]
	if p.gone != nil {
		return p.gone
	}
	if p.pidfd < 0 {
		if p.pid < 0 || !e.openPidfd(rank) {
			return nil // no pidfd: rely on the channel's own errors
		}
	}
	e.pfd[0] = unix.PollFd{Fd: int32(p.pidfd), Events: unix.POLLIN}
	n, err := unix.Poll(e.pfd[:], 0)
	if err == nil && n == 1 && e.pfd[0].Revents&unix.POLLIN != 0 {
		return &PeerError{Rank: rank, PID: p.pid, Err: errors.New("process exited")}
	}
	return nil
}

// openPidfd opens a pidfd on rank's process. A pid that does not exist
// here is not taken as a death: it may live in another PID namespace, so the
// rank is marked as having no usable pid, and the Engine relies on the
// control channel's errors (the endpoint's liveness) for it.
func (e *Engine) openPidfd(rank int) bool {
	p := &e.peers[rank]
	pid := e.peerPID(rank)
	if pid <= 0 {
		return false // unknown for now
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		p.pid = -1
		return false
	}
	p.pidfd, p.pid = fd, pid
	return true
}

// CheckPeer returns a *PeerError if rank's process is known to have exited.
func (e *Engine) CheckPeer(rank int) error {
	if rank < 0 || rank >= e.cfg.Size || rank == e.cfg.Rank {
		return nil
	}
	return e.peerAlive(rank)
}

// closePidfds closes the pidfds of every peer.
func (e *Engine) closePidfds() {
	for i := range e.peers {
		if e.peers[i].pidfd >= 0 {
			unix.Close(e.peers[i].pidfd)
			e.peers[i].pidfd = -1
		}
	}
}
