package fdpass

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNoServer wraps the connect error when nobody serves at the directory
// (yet, or any more): ENOENT or ECONNREFUSED. The caller may wait.
var ErrNoServer = errors.New("fdpass: no server")

// Fetch asks the server at dir for the object name and returns its
// descriptor (close-on-exec) and size, once checked: the directory is
// this user's private one, the server runs as this euid, the reply holds
// exactly one descriptor, and that is a sealed memfd as w asks
// (CheckSealed). object names it in errors.
func Fetch(dir, name, object string, w Want) (int, int64, error) {
	path := SocketPath(dir)
	if err := CheckDir(dir, object); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, 0, fmt.Errorf("%w: %w", ErrNoServer, err)
		}
		return -1, 0, err
	}
	c, err := dial(path)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.EAGAIN) {
			return -1, 0, fmt.Errorf("%w at %s: %w", ErrNoServer, path, err)
		}
		return -1, 0, fmt.Errorf("knemesis: connecting for %s to %s: %w", object, path, err)
	}
	defer c.close()
	cred, err := c.cred()
	if err != nil {
		return -1, 0, fmt.Errorf("knemesis: SO_PEERCRED of %s: %w", path, err)
	}
	e := &Error{Object: object, Path: path, PeerPID: int(cred.Pid), PeerUID: int(cred.Uid)}
	if int(cred.Uid) != os.Geteuid() {
		e.Kind, e.Reason = ErrPeerUID, fmt.Sprintf("the server runs as uid %d, not as this process's uid %d", cred.Uid, os.Geteuid())
		return -1, 0, e
	}
	if len(name) == 0 || len(name) > maxName {
		e.Kind, e.Reason = ErrProtocol, fmt.Sprintf("object name of %d bytes, want 1..%d", len(name), maxName)
		return -1, 0, e
	}
	if err := c.send([]byte(name), nil); err != nil {
		return -1, 0, fmt.Errorf("knemesis: asking %s for %s: %w", path, object, err)
	}
	fd, err := receive(c, e)
	if err != nil {
		return -1, 0, err
	}
	size, bad := CheckSealed(fd, w)
	if bad != "" {
		unix.Close(fd)
		e.Kind, e.Reason = ErrBadFile, bad
		return -1, 0, e
	}
	return fd, size, nil
}

// receive reads the reply and returns its one descriptor; any other count
// closes them all and fails.
func receive(c *sock, e *Error) (int, error) {
	buf := make([]byte, maxReply+1)
	oob := make([]byte, unix.CmsgSpace(4*4)) // room to see, and close, a few too many
	n, oobn, flags, err := c.recv(buf, oob)
	if err != nil {
		return -1, fmt.Errorf("knemesis: reading the reply of %s for %s: %w", e.Path, e.Object, err)
	}
	fds, perr := rights(oob[:oobn])
	bad := func(kind error, reason string) (int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		e.Kind, e.Reason = kind, reason
		return -1, e
	}
	switch {
	case n == 0 || n > maxReply || flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || perr != nil:
		return bad(ErrProtocol, fmt.Sprintf("reply of %d bytes, flags %#x, control %v", n, flags, perr))
	case buf[0] == statusPeerUID:
		return bad(ErrPeerUID, "the server refused this process: "+string(buf[1:n]))
	case buf[0] == statusNotServed:
		return bad(ErrNotServed, string(buf[1:n]))
	case buf[0] != statusOK || len(fds) != 1:
		return bad(ErrProtocol, fmt.Sprintf("reply status %d with %d descriptors, want 0 with one", buf[0], len(fds)))
	}
	return fds[0], nil
}

// rights returns every descriptor the control messages carry.
func rights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_RIGHTS {
			got, err := unix.ParseUnixRights(&m)
			if err != nil {
				return fds, err
			}
			fds = append(fds, got...)
		}
	}
	return fds, nil
}

// Probe says whether a server listens at dir, and its pid (0 when too
// busy to say): the caller judges whether the directory is stale.
func Probe(dir string) (pid int, ok bool) {
	c, err := dial(SocketPath(dir))
	if errors.Is(err, unix.EAGAIN) {
		return 0, true // a backlog full of clients: served, and busy
	}
	if err != nil {
		return 0, false
	}
	defer c.close()
	cred, err := c.cred()
	if err != nil {
		return 0, true
	}
	return int(cred.Pid), true
}
