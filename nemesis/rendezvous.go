package nemesis

import (
	"errors"
	"fmt"
	"os"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/shmfile"
	"golang.org/x/sys/unix"
)

// The segment is a sealed memfd (fdpass.NewSealed): no rank, however it
// misbehaves, can shrink it under the others (SIGBUS) or grow it. It has
// no name; the job's name (segPath) is a 0700 directory holding the
// socket on which the creator serves the memfd to the ranks that join
// (fdpass), from before it builds the segment until every local rank has
// joined. Then the directory goes, and a crash leaves nothing behind.

// segServed is the name the creator serves the segment under.
const segServed = "segment"

// claimName makes the job's rendezvous directory and serves on it,
// replacing what a job that is gone left there.
func claimName(path string) (*fdpass.Server, error) {
	for attempt := 0; ; attempt++ {
		srv, err := fdpass.Listen(path, segObject)
		if err == nil || !errors.Is(err, os.ErrExist) && !errors.Is(err, fdpass.ErrDirNotPrivate) || attempt > 0 {
			return srv, err
		}
		if err := removeIfStale(path); err != nil {
			return nil, err
		}
	}
}

// errGarbage: a file of this user at the segment's name, which is a
// directory: no segment, left by an older layout or by hand.
var errGarbage = errors.New("not a knemesis rendezvous")

// checkName looks at what lies at the segment's name: nil for a private
// directory of this user, errNotYet for nothing, errGarbage for a file of
// this user, and the *shmfile.Error or *fdpass.Error refusing anything
// else (another user's file or directory, a link).
func checkName(path string) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return errNotYet
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return fdpass.CheckDir(path, segObject)
	}
	fd, err := shmfile.Open(path, segObject, unix.O_RDONLY)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return errNotYet
		}
		return err
	}
	unix.Close(fd)
	return errGarbage
}

// removeIfStale removes what lies at the segment's name when no live
// process of this user serves there, and says why it cannot otherwise.
func removeIfStale(path string) error {
	switch err := checkName(path); err {
	case errNotYet:
		return nil
	case errGarbage:
		if err := unix.Unlink(path); err != nil && err != unix.ENOENT {
			return fmt.Errorf("nemesis: removing %s: %w", path, err)
		}
		return nil
	case nil:
	default:
		return err
	}
	if pid, ok := fdpass.Probe(path); ok && (pid == 0 || creatorAlive(pid)) {
		return errorf(ErrSegmentInUse, "%s is served by pid %d, still running", path, pid)
	}
	if err := fdpass.RemoveDir(path, segObject); err != nil {
		return fmt.Errorf("nemesis: removing stale segment %s: %w", path, err)
	}
	return nil
}

// fetchSegment receives the segment's memfd from its creator; errNotYet
// while nobody serves it (yet), ErrStaleSegment when the server is gone.
func fetchSegment(path string) (int, int64, error) {
	switch err := checkName(path); err {
	case nil:
	case errGarbage:
		return -1, 0, errNotYet // rank 0 will replace it
	default:
		return -1, 0, err
	}
	fd, size, err := fdpass.Fetch(path, segServed, segObject, fdpass.Want{MinSize: headerSize})
	switch {
	case err == nil:
		return fd, size, nil
	case errors.Is(err, unix.ECONNREFUSED):
		// Its creator died before every rank joined (its Close would
		// have removed the directory): nobody else will remove it, since
		// the job's name is its key's, which no later job shares. It is
		// removed only if no process holds its lock (fdpass), so a new
		// creator at the name is never disturbed.
		if removed, _ := fdpass.RemoveIfStale(path, segObject); removed {
			return -1, 0, errorf(ErrStaleSegment, "%s left by a creator that is gone (removed)", path)
		}
		return -1, 0, errorf(ErrStaleSegment, "%s left by a creator that is gone", path)
	case errors.Is(err, fdpass.ErrNoServer), errors.Is(err, fdpass.ErrNotServed):
		return -1, 0, errNotYet
	}
	return -1, 0, err
}
