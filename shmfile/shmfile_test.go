package shmfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/otheruser"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/shmfile"
)

// name is a fresh name in /dev/shm, where other users may create files.
func name(t *testing.T) string {
	p := filepath.Join("/dev/shm", "knemesis-shmfile-test-"+launch.NewJobName())
	t.Cleanup(func() { os.Remove(p) })
	return p
}

// wantRefused fails t unless err is a *shmfile.Error for path, owned by
// owner with the type and permission bits mode, whose reason says why.
func wantRefused(t *testing.T, err error, path string, owner int, mode uint32, why string) {
	t.Helper()
	var e *shmfile.Error
	if !errors.As(err, &e) || !errors.Is(err, shmfile.ErrNotPrivate) {
		t.Fatalf("%v: want a *shmfile.Error", err)
	}
	if e.Object != "test object" || e.Path != path || e.Owner != owner || e.Mode != mode || !strings.Contains(e.Reason, why) || e.Fix() == "" {
		t.Fatalf("%+v: want test object %s of uid %d, mode %#o, because %q", *e, path, owner, mode, why)
	}
}

func content(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCreatedIsPrivate: Create makes a regular file of mode 0600 whatever
// the umask, which the other user can neither read, open for writing nor
// truncate; OpenOrCreate then opens it without making it anew.
func TestCreatedIsPrivate(t *testing.T) {
	p := name(t)
	old := unix.Umask(0)
	fd, err := shmfile.Create(p, "test object")
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode != unix.S_IFREG|0o600 || int(st.Uid) != os.Geteuid() {
		t.Fatalf("created mode %#o uid %d, want a regular file of mode 0600 and uid %d", st.Mode, st.Uid, os.Geteuid())
	}
	if _, err := shmfile.Create(p, "test object"); !errors.Is(err, os.ErrExist) {
		t.Fatalf("Create of an existing own file: %v, want os.ErrExist", err)
	}
	fd2, created, err := shmfile.OpenOrCreate(p, "test object")
	if err != nil || created {
		t.Fatalf("OpenOrCreate of an existing own file: created %v, %v", created, err)
	}
	unix.Close(fd2)
	otheruser.Refused(t, p)
}

// TestOtherUsersFileRefused: a file the other user made at the name,
// mode 0666, is refused by Create, Open and OpenOrCreate, and keeps its
// bytes.
func TestOtherUsersFileRefused(t *testing.T) {
	p := name(t)
	otheruser.Precreate(t, p)
	_, err := shmfile.Create(p, "test object")
	wantRefused(t, err, p, otheruser.UID, unix.S_IFREG|0o666, "belongs to uid 61234")
	_, err = shmfile.Open(p, "test object", unix.O_RDWR)
	wantRefused(t, err, p, otheruser.UID, unix.S_IFREG|0o666, "belongs to uid 61234")
	_, _, err = shmfile.OpenOrCreate(p, "test object")
	wantRefused(t, err, p, otheruser.UID, unix.S_IFREG|0o666, "belongs to uid 61234")
	if c := content(t, p); c != "squatter" {
		t.Fatalf("the other user's file holds %q after the attempts, want its own bytes", c)
	}
}

// TestSymlinkRefused: a link the other user put at the name is followed
// by none of Create, Open and OpenOrCreate: each is refused, and the
// link's target, a file of ours, is neither truncated nor written.
func TestSymlinkRefused(t *testing.T) {
	target, p := name(t), name(t)
	if err := os.WriteFile(target, []byte("ours"), 0o600); err != nil {
		t.Fatal(err)
	}
	otheruser.Symlink(t, target, p)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	_, err := shmfile.Create(p, "test object")
	wantRefused(t, err, p, otheruser.UID, st.Mode, "symbolic link")
	_, err = shmfile.Open(p, "test object", unix.O_RDWR)
	wantRefused(t, err, p, otheruser.UID, st.Mode, "symbolic link")
	_, _, err = shmfile.OpenOrCreate(p, "test object")
	wantRefused(t, err, p, otheruser.UID, st.Mode, "symbolic link")
	if c := content(t, target); c != "ours" {
		t.Fatalf("the link's target holds %q after the attempts, want %q", c, "ours")
	}
}

// TestOwnFileOpenToOthersRefused: a file of ours that group or others
// may read is not a private one: Open refuses it.
func TestOwnFileOpenToOthersRefused(t *testing.T) {
	p := name(t)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err := shmfile.Open(p, "test object", unix.O_RDONLY)
	wantRefused(t, err, p, os.Geteuid(), unix.S_IFREG|0o640, "group or other users")
}

// TestNotARegularFileRefused: a FIFO at the name is refused.
func TestNotARegularFileRefused(t *testing.T) {
	p := name(t)
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := shmfile.Open(p, "test object", unix.O_RDWR)
	wantRefused(t, err, p, os.Geteuid(), unix.S_IFIFO|0o600, "not a regular file")
}
