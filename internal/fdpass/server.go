package fdpass

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of the messages: a request is an object's name, a reply a status
// byte and a reason.
const (
	maxName  = 255
	maxReply = 512
)

// Reply statuses.
const (
	statusOK        = 0
	statusNotServed = 1
	statusPeerUID   = 2
)

// Server serves descriptors by name from a directory of its own.
type Server struct {
	dir, object string
	uid         int // this process's euid at Listen: the job's
	made        unix.Stat_t
	lock        int // dir's liveness lock, held until Close (RemoveIfStale)
	ln          *sock
	wg          sync.WaitGroup

	mu      sync.Mutex
	fds     map[string]int // served objects, duplicates owned here
	conns   map[*sock]struct{}
	closed  bool
	refused int // clients refused for their uid
}

// Listen makes dir (0700, which must not exist: an existing one gives an
// error wrapping os.ErrExist, or ErrDirNotPrivate) and serves on its
// socket. object names what is served, in errors.
func Listen(dir, object string) (*Server, error) {
	made, lock, err := makeDir(dir, object)
	if err != nil {
		return nil, err
	}
	ln, err := listen(SocketPath(dir))
	if err != nil {
		unix.Rmdir(dir)
		unix.Close(lock)
		return nil, fmt.Errorf("knemesis: serving %s at %s: %w", object, SocketPath(dir), err)
	}
	s := &Server{dir: dir, object: object, uid: os.Geteuid(), made: made, lock: lock, ln: ln, fds: map[string]int{}, conns: map[*sock]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Serve makes fd available as name until Close; the server keeps a
// duplicate, so the caller may close fd.
func (s *Server) Serve(name string, fd int) error {
	if len(name) == 0 || len(name) > maxName {
		return &Error{Kind: ErrProtocol, Object: s.object, Path: SocketPath(s.dir), PeerUID: -1, Reason: fmt.Sprintf("object name of %d bytes, want 1..%d", len(name), maxName)}
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("knemesis: keeping %s for serving: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.fds[name]; ok {
		unix.Close(old)
	}
	s.fds[name] = dup
	return nil
}

// Refused is the number of clients refused for running as another uid.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Close stops serving, waits for the server's goroutines, closes the
// descriptors it kept and removes the socket and the directory (unless a
// new directory took the name since it was removed).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	s.ln.close()
	s.wg.Wait()
	for _, fd := range s.fds {
		unix.Close(fd)
	}
	removeIfSame(s.dir, s.made)
	unix.Close(s.lock) // after the removal: a sweeper never sees it unlocked before
	return nil
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		fd, err := s.ln.accept()
		if isClosed(err) {
			return
		}
		if err != nil {
			// Nothing else ends serving: the job's later ranks would
			// find a backlog nobody drains. Out of descriptors or
			// memory, let the handlers finish first.
			if err == unix.EMFILE || err == unix.ENFILE || err == unix.ENOBUFS || err == unix.ENOMEM {
				time.Sleep(time.Millisecond)
			}
			continue
		}
		c, err := newSock(fd, s.dir)
		if err != nil {
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(c)
	}
}

// listen binds and listens at path.
func listen(path string) (*sock, error) {
	fd, err := socket()
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// The whole job may ask at once (every rank joining a segment): a
	// full backlog answers connect with EAGAIN, which costs the clients
	// retries, so take the most the system allows.
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return newSock(fd, path)
}

// handle answers one client: its requests, one packet each, until it
// hangs up.
func (s *Server) handle(c *sock) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.close()
	}()
	cred, err := c.cred()
	if err != nil {
		return
	}
	buf := make([]byte, maxName+1)
	for {
		// The request is read before any answer, a refusal too: a socket
		// closed with a packet unread resets the peer, which would then
		// see ECONNRESET instead of the reason.
		n, _, flags, err := c.recv(buf, nil)
		if err != nil || n == 0 || n > maxName || flags&unix.MSG_TRUNC != 0 {
			return
		}
		if int(cred.Uid) != s.uid {
			s.mu.Lock()
			s.refused++
			s.mu.Unlock()
			reply(c, statusPeerUID, fmt.Sprintf("uid %d is not the job's uid %d", cred.Uid, s.uid), -1)
			return
		}
		s.mu.Lock()
		fd, ok := s.fds[string(buf[:n])]
		s.mu.Unlock()
		if !ok {
			reply(c, statusNotServed, fmt.Sprintf("no object %q here", buf[:n]), -1)
			continue
		}
		if reply(c, statusOK, "", fd) != nil {
			return
		}
	}
}

// reply sends status and reason, with fd when it is not -1. The
// descriptor cannot be closed under it: Close waits for this goroutine.
func reply(c *sock, status byte, reason string, fd int) error {
	msg := append([]byte{status}, reason...)
	if len(msg) > maxReply {
		msg = msg[:maxReply]
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	return c.send(msg, oob)
}
