// Package fifo gives the pipe-based LMT backends (package pipe, and
// vmsplice, which builds on it) one pipe per ordered pair of ranks: a named
// FIFO in the job's private directory, and the lmt Stream channel over it
// (Channel). Importing it registers no backend.
//
// A FIFO reaches any pair of a job without help from the launcher and without
// ptrace rights (pidfd_getfd would need the same rights as CMA, defeating a
// fallback from CMA to vmsplice). The receiver creates the FIFO and opens its
// read end before it sends the CTS; the sender opens the write end when the CTS
// arrives, so a non-blocking open never finds the FIFO without a reader. Each
// process holds one end only, so a dead writer shows as end-of-file and a dead
// reader as EPIPE.
//
// A FIFO's name is needed only until the writer has opened it, and is removed
// then by whoever learns it first: the writer right after its open, the
// receiver at its first bytes (the writer may have died between the two), the
// writer when its open finds no reader (the receiver died after its CTS), the
// receiver when it drops the pipe (the sender died before opening) or closes.
// The last rank out removes the directory; the launcher removes it with
// whatever is left when a rank dies between making a FIFO and sending the CTS
// (see launch.JobDir).
package fifo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Pipes holds the FIFO ends of one backend in one process.
type Pipes struct {
	dir, kind string
	// parent, when not empty, is the job's private directory that dir
	// lies in (Channel names dir from the job's key): checked as dir is,
	// and removed, once empty, after it.
	parent  string
	rank    int
	size    int   // capacity asked of every pipe
	readers []int // by source rank, -1 until opened
	writers []int // by destination rank
	// named[src]: the FIFO from src, made by this process, may still
	// have its name in dir.
	named []bool
}

// New prepares the FIFOs named kind-<src>-<dst> under dir, each to be sized
// to size bytes.
func New(dir, kind string, rank, ranks, size int) *Pipes {
	p := &Pipes{dir: dir, kind: kind, rank: rank, size: size,
		readers: make([]int, ranks), writers: make([]int, ranks), named: make([]bool, ranks)}
	for i := range p.readers {
		p.readers[i], p.writers[i] = -1, -1
	}
	return p
}

func (p *Pipes) path(src, dst int) string {
	return filepath.Join(p.dir, p.kind+"-"+strconv.Itoa(src)+"-"+strconv.Itoa(dst))
}

// Reader returns the read end of the FIFO from src, creating and sizing it on
// first use.
func (p *Pipes) Reader(src int) (int, error) {
	if fd := p.readers[src]; fd >= 0 {
		return fd, nil
	}
	path := p.path(src, p.rank)
	// A writer removes the directory once it is empty (see Writer), so
	// it may vanish between MkdirAll and Mkfifo, or under the check:
	// try again then.
	for try := 0; ; try++ {
		if err := os.MkdirAll(p.dir, 0o700); err != nil {
			return -1, fmt.Errorf("%s: private directory: %w", p.kind, err)
		}
		err := checkPrivate(p.dir)
		if err == nil && p.parent != "" {
			// Whoever owns the directory above could rename ours away
			// and put theirs in its place.
			err = checkPrivate(p.parent)
		}
		if err == nil {
			if err = unix.Mkfifo(path, 0o600); err == unix.EEXIST {
				err = nil
			} else if err != nil {
				err = fmt.Errorf("mkfifo %s: %w", path, err)
			}
		}
		if err == nil {
			break
		}
		if !errors.Is(err, unix.ENOENT) || try == 10 {
			return -1, fmt.Errorf("%s: %w", p.kind, err)
		}
	}
	p.named[src] = true
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		p.Unlink(src)
		return -1, fmt.Errorf("%s: opening %s for reading: %w", p.kind, path, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, p.size); err != nil {
		unix.Close(fd)
		p.Unlink(src)
		return -1, fmt.Errorf("%s: F_SETPIPE_SZ %d on %s: %w", p.kind, p.size, path, err)
	}
	p.readers[src] = fd
	return fd, nil
}

// Writer returns the write end of the FIFO to dst, whose reader must be open.
func (p *Pipes) Writer(dst int) (int, error) {
	if fd := p.writers[dst]; fd >= 0 {
		return fd, nil
	}
	path := p.path(p.rank, dst)
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err == unix.ENXIO {
		// The reader that sent the CTS has closed its end: it died,
		// or dropped the pipe. Nobody will open this FIFO again.
		p.remove(path)
	}
	if err != nil {
		return -1, fmt.Errorf("%s: opening %s for writing: %w", p.kind, path, err)
	}
	p.writers[dst] = fd
	// Both ends are open for good: remove the name, so that a crash
	// leaves nothing behind.
	p.remove(path)
	return fd, nil
}

// Read reads from the FIFO from src, whose Reader must be open, as Readv
// does. Its first bytes show that the writer has opened the FIFO, so its name
// goes then: the writer may have died before removing it.
func (p *Pipes) Read(src int, iov []unix.Iovec) (int, error) {
	n, err := Readv(p.readers[src], iov)
	if n > 0 && p.named[src] {
		p.Unlink(src)
	}
	return n, err
}

// Unlink removes the name of the FIFO from src, if this process made it and
// has not removed it yet. The receiver calls it once it knows the writer has
// opened the FIFO (its first bytes arrived), or has given up on it.
func (p *Pipes) Unlink(src int) {
	if p.named[src] {
		p.named[src] = false
		p.remove(p.path(src, p.rank))
	}
}

// remove unlinks a FIFO's name, and the directory if that left it empty.
func (p *Pipes) remove(path string) {
	unix.Unlink(path) // ENOENT: the other end was first
	unix.Rmdir(p.dir) // fails harmlessly while other FIFOs wait in it
	if p.parent != "" {
		unix.Rmdir(p.parent) // and while other objects of the job are in it
	}
}

// Drop closes both ends this process holds with rank and removes the name of
// the FIFO from rank: a sender that died before opening it never will.
func (p *Pipes) Drop(rank int) {
	for _, fds := range [][]int{p.readers, p.writers} {
		if fds[rank] >= 0 {
			unix.Close(fds[rank])
			fds[rank] = -1
		}
	}
	p.Unlink(rank)
}

// Close closes every end and removes the names of the FIFOs this process
// made that are still in the directory.
func (p *Pipes) Close() {
	for rank := range p.readers {
		p.Drop(rank)
	}
}

// Readv reads into iov from fd without blocking: 0 bytes and a nil error
// when the pipe is empty, io.EOF-like ErrEOF when no writer is left.
//
// Readv, Writev and Vmsplice are raw system calls, not announced to the Go
// scheduler: on a non-blocking pipe they wait for nothing but the pipe's
// lock, which the peer holds for one call of its own at most. Announced
// (entersyscall, exitsyscall), a pipe stream made several times as many
// context switches and sysmon wake-ups (docs/performance.md), and a switch
// on the CPU of the process holding the lock stalls the one waiting for it.
func Readv(fd int, iov []unix.Iovec) (int, error) {
	if len(iov) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall(unix.SYS_READV, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	switch {
	case e == unix.EAGAIN || e == unix.EINTR:
		return 0, nil
	case e != 0:
		return 0, e
	case n == 0:
		return 0, ErrEOF
	}
	return int(n), nil
}

// Writev writes iov to fd without blocking: 0 bytes when the pipe is full.
func Writev(fd int, iov []unix.Iovec) (int, error) {
	return write(unix.SYS_WRITEV, fd, iov, 0)
}

// Vmsplice splices the pages of iov into fd without blocking: 0 bytes when
// the pipe is full.
func Vmsplice(fd int, iov []unix.Iovec) (int, error) {
	return write(unix.SYS_VMSPLICE, fd, iov, unix.SPLICE_F_NONBLOCK)
}

func write(trap uintptr, fd int, iov []unix.Iovec, flags uintptr) (int, error) {
	if len(iov) == 0 {
		return 0, nil
	}
	n, _, e := unix.RawSyscall6(trap, uintptr(fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)), flags, 0, 0)
	if e == unix.EAGAIN || e == unix.EINTR {
		return 0, nil
	}
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// ErrEOF is returned by Readv when every writer has closed the FIFO (or
// none has opened it yet).
var ErrEOF = errors.New("end of file on pipe")

// Plan decides the pipe capacity: want, lowered to the cap read from
// maxPath (normally /proc/sys/fs/pipe-max-size). capped says it was lowered;
// below min the plan fails with a reason.
func Plan(want, min int, maxPath string) (size int, capped bool, err error) {
	b, err := os.ReadFile(maxPath)
	if err != nil {
		return 0, false, fmt.Errorf("reading the pipe size cap: %w", err)
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || limit <= 0 {
		return 0, false, fmt.Errorf("%s holds %q, not a size", maxPath, strings.TrimSpace(string(b)))
	}
	if want <= limit {
		return want, false, nil
	}
	if limit < min {
		return limit, true, &CapError{Path: maxPath, Cap: limit, Want: want, Min: min}
	}
	return limit, true, nil
}

// CapError says the pipe size cap is below what a backend needs.
type CapError struct {
	Path           string
	Cap, Want, Min int
}

func (e *CapError) Error() string {
	return fmt.Sprintf("%s caps pipes at %d bytes, below the %d needed (asked for %d)", e.Path, e.Cap, e.Min, e.Want)
}

// checkPrivate refuses a job directory that another user could have made
// first in a shared $TMPDIR: the pipes in it would be theirs to open. It
// must be a real directory (not a symbolic link), ours, and not writable by
// others.
func checkPrivate(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("private directory %s: %w", dir, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("private directory %s is not a directory (a symbolic link?): refusing to put pipes there", dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("private directory %s belongs to uid %d, not to this process (uid %d): refusing to put pipes there", dir, st.Uid, os.Geteuid())
	case st.Mode&0o022 != 0:
		// Others could replace our FIFOs with their own.
		return fmt.Errorf("private directory %s has mode %#o, writable by other users: refusing to put pipes there", dir, st.Mode&0o777)
	}
	return nil
}
