package lmt

import (
	"errors"

	"github.com/knemesis/knemesis/peerfault"
	"golang.org/x/sys/unix"
)

// Liveness. The engine does not watch its peers' processes: whoever drives
// it knows the job and watches already (the Nemesis endpoint's pidfds in a
// job, the control sockets of the lmttest harness), and tells the engine
// with PeerFailed once a peer is gone, after delivering what that peer sent
// before dying — a receiver may send its DONE and exit at once, and that
// DONE must complete the send rather than the death fail it. One watcher,
// one grace, one decision per peer.
//
// A backend that meets an ambiguous error (an end of file on a pipe whose
// writer may not have opened it yet, a KNEM cookie gone) asks once whether
// the peer has exited: Transfer.CheckPeer.

// peer is what the Engine knows of one rank's process.
type peer struct {
	gone error // set by PeerFailed
}

// PeerFailed fails every transfer with rank, whose process is gone, and
// every later one.
func (e *Engine) PeerFailed(rank int, err error) {
	if rank < 0 || rank >= e.cfg.Size {
		return
	}
	var pe *PeerError
	if !errors.As(err, &pe) {
		err = peerfault.Dead(rank, e.peerPID(rank), "", err)
	}
	if e.peers[rank].gone == nil {
		e.peers[rank].gone = err
	}
	for _, t := range e.live {
		if t.peer == rank {
			e.abort(t, err)
		}
	}
}

// CheckPeer returns a *PeerError if rank's process is known to be gone or
// has exited now, as Transfer.CheckPeer does.
func (e *Engine) CheckPeer(rank int) error {
	if rank < 0 || rank >= e.cfg.Size || rank == e.cfg.Rank {
		return nil
	}
	if err := e.peers[rank].gone; err != nil {
		return err
	}
	return exited(rank, e.peerPID(rank))
}

// CheckPeer returns a *PeerError if the peer is known to be gone
// (PeerFailed) or its process has exited now, so that a backend can tell
// an end-of-file from a peer that has not started yet. It looks once (a
// few system calls), for error paths, not as a watch.
func (t *Transfer) CheckPeer() error { return t.e.CheckPeer(t.peer) }

// exited looks once whether process pid of rank has exited. A pid that
// does not exist here is not taken as a death: it may live in another PID
// namespace, and the watcher that drives the engine knows better.
func exited(rank, pid int) error {
	if pid <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 0); err == nil && n == 1 && pfd[0].Revents&unix.POLLIN != 0 {
		return peerfault.Dead(rank, pid, "process exited", nil)
	}
	return nil
}
