package lmttest

import (
	"errors"

	"golang.org/x/sys/unix"
)

// watcher is the harness's watch over the peers' processes, standing in for
// the Nemesis endpoint's: the engine keeps none of its own. Every
// watchEvery Polls it looks at a pidfd per peer; for a peer that exited it
// first delivers what is left on that peer's socket (the peer may have
// sent a DONE and exited at once), then reports the death to the engine.
type watcher struct {
	pidfds []unix.PollFd // by rank; Fd -1 for self, a dead peer, or no pidfd
	polls  int
}

// watchEvery is how many Polls pass between two looks: a poll(2) on the
// pidfds costs about as much as copying a few KiB.
const watchEvery = 256

func (w *watcher) open(pids []int, self int) {
	w.pidfds = make([]unix.PollFd, len(pids))
	for rank, pid := range pids {
		w.pidfds[rank] = unix.PollFd{Fd: -1, Events: unix.POLLIN}
		if rank == self {
			continue
		}
		if fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK); err == nil {
			w.pidfds[rank].Fd = int32(fd)
		}
	}
}

// watch reports the peers that exited since the last look.
func (c *Channel) watch() error {
	w := &c.watcher
	if w.pidfds == nil || c.Engine == nil {
		return nil
	}
	if w.polls++; w.polls%watchEvery != 0 {
		return nil
	}
	if n, err := unix.Poll(w.pidfds, 0); err != nil || n == 0 {
		return nil
	}
	for rank := range w.pidfds {
		p := &w.pidfds[rank]
		if p.Fd < 0 || p.Revents&unix.POLLIN == 0 {
			continue
		}
		unix.Close(int(p.Fd))
		p.Fd = -1
		if err := c.receive(rank); err != nil {
			return err
		}
		c.Engine.PeerFailed(rank, errors.New("process exited"))
	}
	return nil
}

// closeWatch releases the pidfds.
func (w *watcher) closeWatch() {
	for i := range w.pidfds {
		if w.pidfds[i].Fd >= 0 {
			unix.Close(int(w.pidfds[i].Fd))
			w.pidfds[i].Fd = -1
		}
	}
}
