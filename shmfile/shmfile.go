// Package shmfile creates and opens the files that the ranks of one job
// share on a node (the nemesis segment, shm rings, RMA windows, the
// collectives' file), so that none of them can be another user's.
//
// The contract: [Create] makes a file that did not exist (O_EXCL), never
// through a symbolic link (O_NOFOLLOW), mode 0600, and [Open] opens one
// never through a symbolic link; after either, the descriptor is checked
// with fstat(2): a regular file, owned by this process's effective uid,
// with no access for group or others. A file that fails is refused with an
// [*Error] naming the object, its path, its owner and mode, and the fix;
// nothing of it is read or mapped. Every descriptor is close-on-exec.
//
// Directories such as /dev/shm are world-writable and sticky: another user
// may create a file under the name a job will use (to be adopted and read,
// or to make the job fail), or a symbolic link there (to have the job
// truncate the link's target). Exclusive creation and the checks turn both
// into an error at setup; names derived from the job's key (package
// jobkey) keep another user from guessing them at all.
package shmfile

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNotPrivate is the kind of every [*Error], for errors.Is.
var ErrNotPrivate = errors.New("shared file is not private to this user")

// Mode is the permission every shared file is created with.
const Mode = 0o600

// Error refuses a shared file that is not this user's own.
type Error struct {
	Object string // what the file is for, such as "nemesis segment"
	Path   string
	Owner  int    // the file's owner uid; -1 when it could not be read
	Mode   uint32 // the file's st_mode (type and permission bits)
	Reason string // what is wrong, in words
}

func (e *Error) Error() string {
	return fmt.Sprintf("knemesis: %s %s (owner uid %d, mode %#o): %s; fix: %s",
		e.Object, e.Path, e.Owner, e.Mode&0o7777, e.Reason, e.Fix())
}

// Is matches ErrNotPrivate.
func (e *Error) Is(target error) bool { return target == ErrNotPrivate }

// Fix says what to do about it.
func (e *Error) Fix() string {
	if e.Owner >= 0 && e.Owner != os.Geteuid() {
		return fmt.Sprintf("another user (uid %d) made this name: remove %s as root or that user, and start the job with a key of its own (launch.Run, PMIx, or jobkey.New in %s) so that its names cannot be guessed", e.Owner, e.Path, "KNEMESIS_JOB_KEY")
	}
	return fmt.Sprintf("remove %s (it is not a file this toolkit made) and run the job again", e.Path)
}

// Create makes the file at path, which must not exist, for object, and
// checks it. An existing file of this user is reported as an error
// wrapping os.ErrExist (the caller may know it is stale); anything else at
// the name (a link, another user's file) is an *Error.
func Create(path, object string) (int, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, Mode)
	if err == unix.EEXIST {
		if ferr := refuseAt(path, object); ferr != nil {
			return -1, ferr
		}
		return -1, fmt.Errorf("knemesis: creating %s %s: %w", object, path, os.ErrExist)
	}
	if err != nil {
		return -1, fmt.Errorf("knemesis: creating %s %s: %w", object, path, err)
	}
	if err := Check(fd, path, object); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Open opens the existing file at path for object with flags (O_RDONLY
// or O_RDWR), and checks it. A file that does not exist gives an error
// wrapping unix.ENOENT.
func Open(path, object string, flags int) (int, error) {
	fd, err := unix.Open(path, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP || err == unix.EACCES || err == unix.EPERM {
			if ferr := refuseAt(path, object); ferr != nil {
				return -1, ferr
			}
		}
		return -1, fmt.Errorf("knemesis: opening %s %s: %w", object, path, err)
	}
	if err := Check(fd, path, object); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// OpenOrCreate opens the file at path for object read-write, creating it
// when it does not exist; created says which. Both are checked as Create
// and Open check.
func OpenOrCreate(path, object string) (fd int, created bool, err error) {
	for try := 0; ; try++ {
		fd, err = Create(path, object)
		if err == nil || !errors.Is(err, os.ErrExist) {
			return fd, err == nil, err
		}
		fd, err = Open(path, object, unix.O_RDWR)
		// Removed between the two: the peer gave up on it; make it anew.
		if !errors.Is(err, unix.ENOENT) || try == 3 {
			return fd, false, err
		}
	}
}

// Check refuses the file open at fd unless it is a regular file of this
// process's effective uid that group and others cannot access.
func Check(fd int, path, object string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("knemesis: fstat of %s %s: %w", object, path, err)
	}
	return check(&st, path, object)
}

func check(st *unix.Stat_t, path, object string) error {
	e := &Error{Object: object, Path: path, Owner: int(st.Uid), Mode: st.Mode}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		e.Reason = "it is a symbolic link, which a shared file never is"
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		e.Reason = "it is not a regular file"
	case int(st.Uid) != os.Geteuid():
		e.Reason = fmt.Sprintf("it belongs to uid %d, not to this process's uid %d", st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		e.Reason = "group or other users may access it"
	default:
		return nil
	}
	return e
}

// refuseAt returns the *Error for what lies at path, when it is not a
// file this user may use; nil when it is (or when it is gone).
func refuseAt(path, object string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil
	}
	return check(&st, path, object)
}
