package fdpass

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// sock is a non-blocking SOCK_SEQPACKET unix socket driven by Go's poller
// through an *os.File: a goroutine waiting on it holds no thread, and
// closing it wakes the waiter. Package net would do the same, but it
// links cgo's resolver into every program, and a program with cgo loses
// syscall.AllThreadsSyscall (which tests use to drop capabilities).
type sock struct {
	f  *os.File
	rc syscall.RawConn
}

func newSock(fd int, name string) (*sock, error) {
	f := os.NewFile(uintptr(fd), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &sock{f: f, rc: rc}, nil
}

// socket makes a close-on-exec, non-blocking seqpacket socket.
func socket() (int, error) {
	return unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
}

// io runs op until it stops answering EAGAIN, waiting for readiness
// (read or write) in between; closing s ends the wait with an error.
func (s *sock) io(write bool, op func(fd int) error) error {
	var opErr error
	f := func(fd uintptr) bool {
		opErr = op(int(fd))
		return opErr != unix.EAGAIN
	}
	var err error
	if write {
		err = s.rc.Write(f)
	} else {
		err = s.rc.Read(f)
	}
	if err != nil {
		// The poller's own error: the file is closing (poll's
		// ErrFileClosing, which is not os.ErrClosed) or invalid.
		return fmt.Errorf("%w: %v", os.ErrClosed, err)
	}
	return opErr
}

func (s *sock) accept() (int, error) {
	var nfd int
	err := s.io(false, func(fd int) (err error) {
		nfd, _, err = unix.Accept4(fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		return err
	})
	return nfd, err
}

// recv reads one packet; descriptors it carries arrive close-on-exec.
func (s *sock) recv(p, oob []byte) (n, oobn, flags int, err error) {
	err = s.io(false, func(fd int) (err error) {
		n, oobn, flags, _, err = unix.Recvmsg(fd, p, oob, unix.MSG_CMSG_CLOEXEC)
		return err
	})
	return
}

func (s *sock) send(p, oob []byte) error {
	return s.io(true, func(fd int) error { return unix.Sendmsg(fd, p, oob, nil, 0) })
}

// cred is SO_PEERCRED: who connected (for a server), who listened (for a
// client).
func (s *sock) cred() (*unix.Ucred, error) {
	var cred *unix.Ucred
	var gerr error
	if err := s.rc.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, gerr
}

func (s *sock) close() { s.f.Close() }

// dial connects to the socket at path. A unix socket connects at once or
// fails (EAGAIN: its backlog is full, a server busy enough to try again).
func dial(path string) (*sock, error) {
	fd, err := socket()
	if err != nil {
		return nil, err
	}
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "connect", Path: path, Err: err}
	}
	return newSock(fd, path)
}

// isClosed says whether err is a wait ended by close.
func isClosed(err error) bool { return errors.Is(err, os.ErrClosed) }
