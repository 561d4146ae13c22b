package fdpass

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// sockName is the socket's name inside the directory.
const sockName = "sock"

// SocketPath is the socket a server at dir listens on.
func SocketPath(dir string) string { return filepath.Join(dir, sockName) }

// makeDir creates dir 0700, which must not exist, and returns its
// identity and a descriptor of it holding the directory's liveness lock
// (an exclusive flock, see RemoveIfStale) for as long as the server
// lives: the kernel drops it when the process dies, however it dies. An
// existing name gives an error wrapping os.ErrExist when it is a
// directory this user may use (the caller judges whether it is stale),
// an ErrDirNotPrivate *Error otherwise.
func makeDir(dir, object string) (unix.Stat_t, int, error) {
	var st unix.Stat_t
	for try := 0; ; try++ {
		if err := unix.Mkdir(dir, 0o700); err != nil {
			if err == unix.EEXIST {
				if err := CheckDir(dir, object); err != nil {
					return st, -1, err
				}
				return st, -1, fmt.Errorf("knemesis: making the directory of %s %s: %w", object, dir, os.ErrExist)
			}
			return st, -1, fmt.Errorf("knemesis: making the directory of %s %s: %w", object, dir, err)
		}
		lock, err := lockDir(dir, &st)
		if err == nil {
			// mkdir applies the umask, which may only remove bits;
			// 0700 is kept unless the umask denies the owner, which
			// then fails here.
			if err := checkDirStat(&st, dir, object); err != nil {
				unix.Close(lock)
				return st, -1, err
			}
			return st, lock, nil
		}
		// A sweeper (RemoveIfStale) found the new directory unlocked
		// and removes it, or has: make it again.
		if err != errRaced || try == 100 {
			return st, -1, fmt.Errorf("knemesis: locking the directory of %s %s: %w", object, dir, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// errRaced: the directory was locked or replaced by another process
// between its mkdir and the lock.
var errRaced = errors.New("directory taken over while being made")

// lockDir opens dir and takes its exclusive lock without waiting, and
// checks that the directory locked is still the one at the name; st is
// its identity.
func lockDir(dir string, st *unix.Stat_t) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return -1, errRaced
	}
	if err != nil {
		return -1, err
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if err == unix.EWOULDBLOCK {
			return -1, errRaced
		}
		return -1, err
	}
	var now unix.Stat_t
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if unix.Lstat(dir, &now) != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		unix.Close(fd)
		return -1, errRaced
	}
	return fd, nil
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

// RemoveIfStale removes dir, the directory of a server that is gone,
// with the socket it left (a server killed, or dead before its Close):
// the first process of this user to come by, a later rank of the job or
// any later job, cleans up after it. A directory is stale when nobody
// holds its liveness lock (Listen takes it, the kernel drops it with the
// process) and nobody answers on its socket; the check and the removal
// happen under the lock, so a live server's directory, or one a new
// server is making, is never removed. Only a private directory of this
// user holding nothing but the socket is touched. It says whether it
// removed dir; a directory that is live, or not a server's, is left
// with no error.
func RemoveIfStale(dir, object string) (bool, error) {
	if err := CheckDir(dir, object); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	var st unix.Stat_t
	lock, err := lockDir(dir, &st)
	if err == errRaced {
		return false, nil // live, or removed or replaced meanwhile
	}
	if err != nil {
		return false, fmt.Errorf("knemesis: locking the directory of %s %s: %w", object, dir, err)
	}
	defer unix.Close(lock)
	if err := checkDirStat(&st, dir, object); err != nil {
		return false, err
	}
	if _, live := Probe(dir); live {
		return false, nil // a server that takes no lock
	}
	if ok, err := onlySocket(dir, true); err != nil || !ok {
		return false, err
	}
	if err := unix.Unlink(SocketPath(dir)); err != nil && err != unix.ENOENT {
		return false, fmt.Errorf("knemesis: removing %s: %w", SocketPath(dir), err)
	}
	if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
		return false, fmt.Errorf("knemesis: removing %s: %w", dir, err)
	}
	return true, nil
}

// onlySocket says whether dir holds nothing but a server's socket (or,
// when empty is true, nothing at all: a server killed between its mkdir
// and its bind).
func onlySocket(dir string, empty bool) (bool, error) {
	names, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("knemesis: reading %s: %w", dir, err)
	}
	switch {
	case len(names) == 0:
		return empty, nil
	case len(names) > 1 || names[0].Name() != sockName:
		return false, nil
	}
	var st unix.Stat_t
	if err := unix.Lstat(SocketPath(dir), &st); err != nil {
		return false, nil
	}
	return st.Mode&unix.S_IFMT == unix.S_IFSOCK, nil
}

// Sweep removes the stale server directories (RemoveIfStale) whose names
// in parent start with prefix, and returns how many it removed. Only
// private directories of this user that hold a server's socket and
// nothing else are considered: another program's directory under the
// same prefix, or one a server is still making, is left alone. Other
// users' entries are skipped without error.
func Sweep(parent, prefix, object string) int {
	f, err := os.Open(parent)
	if err != nil {
		return 0
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	n := 0
	for _, name := range names {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		dir := filepath.Join(parent, name)
		if CheckDir(dir, object) != nil {
			continue
		}
		if ok, _ := onlySocket(dir, false); !ok {
			continue
		}
		if removed, _ := RemoveIfStale(dir, object); removed {
			n++
		}
	}
	return n
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
