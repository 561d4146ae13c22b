// Package tmpfs has what knemesis's shared-memory files need from tmpfs
// beyond golang.org/x/sys/unix.
package tmpfs

import "golang.org/x/sys/unix"

// Allocate allocates the first size bytes of fd's file now (fallocate(2),
// mode 0), so that a full file system fails the caller at once instead of
// a later store with SIGBUS. Before Linux 6.9 (Debian 12's 6.1 among them)
// tmpfs gives a long allocation up with EINTR whenever a signal is
// pending, and the Go runtime signals its threads (SIGURG, to preempt
// goroutines): the call is repeated until it ends otherwise. Later kernels
// stop only for a fatal signal.
func Allocate(fd int, size int64) error {
	for {
		if err := fallocate(fd, 0, 0, size); err != unix.EINTR {
			return err
		}
	}
}

// fallocate is the system call; the tests interrupt it.
var fallocate = unix.Fallocate
