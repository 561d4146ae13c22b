package fdpass

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// sockName is the socket's name inside the directory.
const sockName = "sock"

// SocketPath is the socket a server at dir listens on.
func SocketPath(dir string) string { return filepath.Join(dir, sockName) }

// makeDir creates dir 0700, which must not exist, and returns its
// identity; an existing name gives an error wrapping os.ErrExist when it
// is a directory this user may use (the caller judges whether it is
// stale), an ErrDirNotPrivate *Error otherwise.
func makeDir(dir, object string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Mkdir(dir, 0o700); err != nil {
		if err == unix.EEXIST {
			if err := CheckDir(dir, object); err != nil {
				return st, err
			}
			return st, fmt.Errorf("knemesis: making the directory of %s %s: %w", object, dir, os.ErrExist)
		}
		return st, fmt.Errorf("knemesis: making the directory of %s %s: %w", object, dir, err)
	}
	if err := unix.Lstat(dir, &st); err != nil {
		return st, fmt.Errorf("knemesis: lstat of %s: %w", dir, err)
	}
	// mkdir applies the umask, which may only remove bits; 0700 is kept
	// unless the umask denies the owner, which then fails here.
	return st, checkDirStat(&st, dir, object)
}

// CheckDir refuses dir unless it is a directory (not a link to one) of
// this process's euid, with no access for group or others: then no other
// user (root aside) can have made or replaced anything in it.
func CheckDir(dir, object string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("knemesis: the directory of %s %s: %w", object, dir, err)
	}
	return checkDirStat(&st, dir, object)
}

func checkDirStat(st *unix.Stat_t, dir, object string) error {
	e := &Error{Kind: ErrDirNotPrivate, Object: object, Path: dir, PeerUID: -1}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		e.Reason = "it is a symbolic link"
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		e.Reason = fmt.Sprintf("it is not a directory (mode %#o)", st.Mode)
	case int(st.Uid) != os.Geteuid():
		e.Reason = fmt.Sprintf("it belongs to uid %d, not to this process's uid %d", st.Uid, os.Geteuid())
	case st.Mode&0o777 != 0o700:
		e.Reason = fmt.Sprintf("its mode is %#o, not 0700", st.Mode&0o777)
	default:
		return nil
	}
	return e
}

// RemoveDir removes the socket and the directory dir of a server that is
// gone, and anything else in it (a crashed server's leftovers); a
// directory that is not this user's private one is left alone.
func RemoveDir(dir, object string) error {
	if err := CheckDir(dir, object); err != nil {
		return err
	}
	names, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("knemesis: reading %s: %w", dir, err)
	}
	for _, n := range names {
		if err := unix.Unlink(filepath.Join(dir, n.Name())); err != nil && err != unix.ENOENT {
			return fmt.Errorf("knemesis: removing %s: %w", filepath.Join(dir, n.Name()), err)
		}
	}
	if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
		return fmt.Errorf("knemesis: removing %s: %w", dir, err)
	}
	return nil
}

// removeIfSame removes dir and its socket only when dir is still the
// directory whose identity was made: a later job of the same name may
// have made a new one there since this one's name was removed.
func removeIfSame(dir string, made unix.Stat_t) {
	var st unix.Stat_t
	if unix.Lstat(dir, &st) != nil || st.Dev != made.Dev || st.Ino != made.Ino {
		return
	}
	_ = unix.Unlink(SocketPath(dir))
	_ = unix.Rmdir(dir)
}
