// Package exitwait waits for another process to exit, for tests that kill
// a rank or wait for one to end.
//
// It waits on a pidfd, with no deadline: a killed process exits however
// loaded the machine is, only later, and a fixed deadline would fail a
// test that is merely slow. A process that never exits is caught by go
// test's own -timeout, which prints where each goroutine waited.
package exitwait

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Wait returns once process pid has exited (a zombie counts: it has no
// memory or files left), or at once if there is no such process.
func Wait(pid int) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open(%d): %w", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll of pid %d's pidfd: %w", pid, err)
		}
		if n == 1 {
			return nil
		}
	}
}
