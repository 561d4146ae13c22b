package fdpass

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/internal/otheruser"
	"golang.org/x/sys/unix"
)

const object = "test object"

func serve(t *testing.T) (*Server, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "srv")
	s, err := Listen(dir, object)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// TestSealedHandover: the descriptor a client receives is the server's
// memfd (a byte written through one is read through the other), and no
// holder, the server included, can shrink or grow it: EPERM each time.
func TestSealedHandover(t *testing.T) {
	s, dir := serve(t)
	fd, err := NewSealed("fdpass-test", 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := s.Serve("mem", fd); err != nil {
		t.Fatal(err)
	}
	got, size, err := Fetch(dir, "mem", object, Want{Size: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(got)
	if size != 8192 {
		t.Fatalf("size %d, want 8192", size)
	}
	if _, err := unix.Pwrite(fd, []byte("x"), 4096); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := unix.Pread(got, b, 4096); err != nil || b[0] != 'x' {
		t.Fatalf("read %q, %v through the received descriptor, want %q", b, err, "x")
	}
	for _, h := range []int{fd, got} {
		for _, n := range []int64{0, 4096, 1 << 20} {
			if err := unix.Ftruncate(h, n); err != unix.EPERM {
				t.Errorf("ftruncate(%d) of the sealed memfd: %v, want EPERM", n, err)
			}
		}
	}
	if _, err := unix.FcntlInt(uintptr(got), unix.F_ADD_SEALS, unix.F_SEAL_WRITE); err != unix.EPERM {
		t.Errorf("adding a seal: %v, want EPERM (F_SEAL_SEAL)", err)
	}
}

// TestRefusedFiles: an unsealed memfd, a memfd of another size and an
// unknown name are refused with their kinds, and no descriptor stays open
// in the client.
func TestRefusedFiles(t *testing.T) {
	s, dir := serve(t)
	open, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(open)
	unix.Fchmod(open, 0o600)
	unix.Ftruncate(open, 4096)
	s.Serve("unsealed", open)
	sealed, err := NewSealed("sealed", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sealed)
	s.Serve("sealed", sealed)
	before := openFDs(t)
	for _, c := range []struct {
		name   string
		w      Want
		kind   error
		reason string
	}{
		{"unsealed", Want{Size: 4096}, ErrBadFile, "its seals are 0x0, not F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL (0x7): its size could change under the mapping"},
		{"sealed", Want{Size: 8192}, ErrBadFile, "it is 4096 bytes, want 8192"},
		{"sealed", Want{MinSize: 8192}, ErrBadFile, "it is 4096 bytes, want at least 8192"},
		{"nothing", Want{}, ErrNotServed, `no object "nothing" here`},
	} {
		_, _, err := Fetch(dir, c.name, object, c.w)
		var e *Error
		if !errors.As(err, &e) || e.Kind != c.kind || e.Reason != c.reason || e.PeerPID != os.Getpid() || e.Object != object {
			t.Errorf("%s: %v, want %v because %q, from pid %d", c.name, err, c.kind, c.reason, os.Getpid())
		}
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d descriptors open after the refusals, %d before", after, before)
	}
}

// openFDs counts this process's descriptors of memfds (the server's
// sockets close on their own time, after the client's).
func openFDs(t *testing.T) int {
	t.Helper()
	n, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	memfds := 0
	for _, e := range n {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); strings.HasPrefix(l, "/memfd:") {
			memfds++
		}
	}
	return memfds
}

// TestDirectoryChecked: a directory not 0700, or a link at the name, is
// refused by Listen and by Fetch; Close ends every goroutine the server
// started (one client still connected) and removes the socket and the
// directory.
func TestDirectoryChecked(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o755)
	link := filepath.Join(base, "link")
	os.Symlink(open, link)
	for _, c := range []struct{ dir, reason string }{{open, "its mode is 0755, not 0700"}, {link, "it is a symbolic link"}} {
		if _, err := Listen(c.dir, object); !errors.Is(err, ErrDirNotPrivate) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("Listen at %s: %v, want ErrDirNotPrivate because %q", c.dir, err, c.reason)
		}
		if _, _, err := Fetch(c.dir, "x", object, Want{}); !errors.Is(err, ErrDirNotPrivate) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("Fetch at %s: %v, want ErrDirNotPrivate because %q", c.dir, err, c.reason)
		}
	}
	dir := filepath.Join(base, "srv")
	goroutines := runtime.NumGoroutine()
	s, err := Listen(dir, object)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(dir, object); !errors.Is(err, os.ErrExist) {
		t.Errorf("second Listen at %s: %v, want os.ErrExist", dir, err)
	}
	idle, err := dial(SocketPath(dir)) // a client that never asks: Close ends its handler
	if err != nil {
		t.Fatal(err)
	}
	defer idle.close()
	if _, _, err := Fetch(dir, "x", object, Want{}); !errors.Is(err, ErrNotServed) {
		t.Errorf("Fetch of nothing: %v, want ErrNotServed", err)
	}
	s.Close()
	if n := runtime.NumGoroutine(); n > goroutines { // fewer: one of an earlier test's ended meanwhile
		t.Errorf("%d goroutines after Close, %d before Listen", n, goroutines)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s after Close: %v, want it gone", dir, err)
	}
	if _, _, err := Fetch(dir, "x", object, Want{}); !errors.Is(err, ErrNoServer) {
		t.Errorf("Fetch after Close: %v, want ErrNoServer", err)
	}
}

// TestClientOfOtherUserRefused: a client running as another uid, which
// reached the socket (here its directory and socket are opened to all, as
// root could), is refused by the server after SO_PEERCRED, and gets no
// descriptor.
func TestClientOfOtherUserRefused(t *testing.T) {
	otheruser.Require(t)
	s, dir := serve(t)
	fd, err := NewSealed("secret", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	s.Serve("mem", fd)
	for d := dir; d != filepath.Dir(filepath.Dir(filepath.Dir(dir))); d = filepath.Dir(d) {
		os.Chmod(d, 0o711) // t.TempDir's two levels and the server's
	}
	os.Chmod(SocketPath(dir), 0o777)
	var ferr error
	otheruser.AsOther(t, func() {
		// The directory's check would refuse first: talk to the socket
		// as an attacker would, with the client's own reading of replies.
		c, err := dial(SocketPath(dir))
		if err != nil {
			ferr = err
			return
		}
		defer c.close()
		c.send([]byte("mem"), nil)
		_, ferr = receive(c, &Error{Object: object, Path: SocketPath(dir), PeerUID: 0})
	})
	var e *Error
	want := "the server refused this process: uid 61234 is not the job's uid 0"
	if !errors.As(ferr, &e) || e.Kind != ErrPeerUID || e.Reason != want {
		t.Fatalf("client of uid %d: %v, want ErrPeerUID because %q", otheruser.UID, ferr, want)
	}
	if s.Refused() != 1 {
		t.Fatalf("server counted %d refused clients, want 1", s.Refused())
	}
}

// TestServerOfOtherUserRefused: a socket listened on by another uid, in
// this user's own directory, is refused by the client after SO_PEERCRED
// before it sends a request.
func TestServerOfOtherUserRefused(t *testing.T) {
	otheruser.Require(t)
	dir := filepath.Join(t.TempDir(), "srv")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sock)
	if err := unix.Bind(sock, &unix.SockaddrUnix{Name: SocketPath(dir)}); err != nil {
		t.Fatal(err)
	}
	otheruser.AsOther(t, func() { err = unix.Listen(sock, 1) })
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Fetch(dir, "mem", object, Want{})
	var e *Error
	want := "the server runs as uid 61234, not as this process's uid 0"
	if !errors.As(err, &e) || e.Kind != ErrPeerUID || e.Reason != want || e.PeerUID != otheruser.UID || e.PeerPID != os.Getpid() {
		t.Fatalf("server of uid %d: %v, want ErrPeerUID because %q", otheruser.UID, err, want)
	}
}
