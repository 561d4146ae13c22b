package fdpass

import (
	"fmt"
	"net"
	"os"
	"sync"

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
	ln          *net.UnixListener
	wg          sync.WaitGroup

	mu      sync.Mutex
	fds     map[string]int // served objects, duplicates owned here
	conns   map[*net.UnixConn]struct{}
	closed  bool
	refused int // clients refused for their uid
}

// Listen makes dir (0700, which must not exist: an existing one gives an
// error wrapping os.ErrExist, or ErrDirNotPrivate) and serves on its
// socket. object names what is served, in errors.
func Listen(dir, object string) (*Server, error) {
	made, err := makeDir(dir, object)
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: SocketPath(dir), Net: "unixpacket"})
	if err != nil {
		unix.Rmdir(dir)
		return nil, fmt.Errorf("knemesis: serving %s at %s: %w", object, SocketPath(dir), err)
	}
	ln.SetUnlinkOnClose(false) // Close removes it, if still the one made
	s := &Server{dir: dir, object: object, uid: os.Geteuid(), made: made, ln: ln, fds: map[string]int{}, conns: map[*net.UnixConn]struct{}{}}
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
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
	for _, fd := range s.fds {
		unix.Close(fd)
	}
	removeIfSame(s.dir, s.made)
	return nil
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return // closed; a transient error would end it too, as a lost peer does
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(c)
	}
}

// handle answers one client: its requests, one packet each, until it
// hangs up.
func (s *Server) handle(c *net.UnixConn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	cred, err := peerCred(c)
	if err != nil {
		return
	}
	buf := make([]byte, maxName+1)
	for {
		// The request is read before any answer, a refusal too: a socket
		// closed with a packet unread resets the peer, which would then
		// see ECONNRESET instead of the reason.
		n, _, flags, _, err := c.ReadMsgUnix(buf, nil)
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
func reply(c *net.UnixConn, status byte, reason string, fd int) error {
	msg := append([]byte{status}, reason...)
	if len(msg) > maxReply {
		msg = msg[:maxReply]
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	_, _, err := c.WriteMsgUnix(msg, oob, nil)
	return err
}

// peerCred is the SO_PEERCRED of c: who connected (for a server), who
// listened (for a client).
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, gerr
}
