package rma

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/shmfile"
)

// Allocate creates, collectively over ep's job, a window in which this
// rank's part is size bytes of new memory (zeroed), every rank passing its
// own size. All parts lie in one shared mapping of a file made for this
// window alone, so that every rank reaches every part directly: put and
// get are one user-space copy, atomics are CPU atomics, and a
// PutNotify's notification is written straight into a ring the target
// polls (ring.go).
//
// The file lives in Options.Dir (/dev/shm) only while the ranks map it:
// rank 0 unlinks it as soon as every rank has, or as soon as creation
// fails. A file left by a rank 0 killed in between carries its pid in its
// name and is removed by the next Allocate on the machine.
//
// ep is what the application holds: a *nemesis.Endpoint, or the
// *knemesis.Endpoint that knemesis.Join returns.
func Allocate(ep nemesis.Holder, size int, o *Options) (*Window, error) {
	if size < 0 {
		return nil, errorf(ErrInvalidArg, "window size %d", size)
	}
	e, err := engineOf(nemesis.EndpointOf(ep))
	if err != nil {
		return nil, err
	}
	w := e.newWindow()
	if err := w.allocate(size, o.dir()); err != nil {
		w.release()
		return nil, err
	}
	w.route[e.rank].Mechanism = Self
	for t := range w.route {
		if t != e.rank {
			w.route[t].Mechanism = Allocated
		}
	}
	return w, nil
}

// partAlign: every part starts on a page, so that atomics are aligned
// wherever the word's offset is, and parts do not share cache lines.
const partAlign = 4096

func (w *Window) allocate(size int, dir string) error {
	e := w.e
	all := make([][collLen]byte, e.size)
	if err := w.allgather(putUint64s(uint64(size)), all); err != nil {
		return err
	}
	offs := make([]int, e.size+1)
	for r := range e.size {
		w.sizes[r] = int(getUint64(all[r], 0))
		offs[r+1] = offs[r] + (w.sizes[r]+partAlign-1)&^(partAlign-1)
	}
	// The notification rings follow the parts, one per rank.
	rings := offs[e.size]
	total := (rings + e.size*ringLen + partAlign - 1) &^ (partAlign - 1)
	pid0, err := e.ep.PeerPID(0)
	if err != nil {
		return err
	}
	// The key's part keeps another user from guessing the name: from
	// creating it first, or a link there (see package shmfile).
	name := filepath.Join(dir, fmt.Sprintf("%s%s-%s-w%d-p%d", shmPrefix, e.ep.Job(), e.ep.JobKey().Name("rma/window"), w.id, pid0))
	// Step 1: rank 0 makes the file. Step 2: the others map it. Each
	// step ends with every rank's status, so that all fail together.
	var fd int
	var ferr error
	if e.rank == 0 {
		removeStale(dir)
		fd, ferr = createShm(name, total)
		if ferr == nil {
			// Whatever happens, nothing stays; but what was there
			// before (another user's file) is not ours to remove.
			defer os.Remove(name)
		}
	}
	if err := w.agree(ferr); err != nil {
		if fd > 0 {
			unix.Close(fd)
		}
		return err
	}
	if e.rank != 0 {
		fd, ferr = shmfile.Open(name, windowObject, unix.O_RDWR)
	}
	if ferr == nil {
		w.mem, ferr = unix.Mmap(fd, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		unix.Close(fd)
		if ferr != nil {
			ferr = fmt.Errorf("rma: mapping %d bytes of window file %s: %w", total, name, ferr)
		}
	}
	if ferr == nil {
		// Before the last step: a peer that has finished it may put at
		// once, and its packets can come in the same Poll as its step.
		w.parts = make([][]byte, e.size)
		for r := range e.size {
			w.parts[r] = w.mem[offs[r] : offs[r]+w.sizes[r] : offs[r]+w.sizes[r]]
		}
		w.local = w.parts[e.rank]
		w.rings = make([]noteRing, e.size)
		for r := range e.size {
			w.rings[r] = ringAt(w.mem[rings+r*ringLen:])
		}
		w.ring.noteRing = w.rings[e.rank]
		w.place()
		e.ringWins = append(e.ringWins, w)
	}
	return w.agree(ferr)
}

// agree tells every rank whether this one succeeded and returns the first
// failure: this rank's own, or one naming the rank that failed.
func (w *Window) agree(mine error) error {
	all := make([][collLen]byte, w.e.size)
	var st []byte
	if mine != nil {
		msg := mine.Error()
		st = append([]byte{1}, msg[:min(len(msg), collLen-1)]...)
	} else {
		st = []byte{0}
	}
	if err := w.allgather(st, all); err != nil {
		return err
	}
	if mine != nil {
		return mine
	}
	for r, s := range all {
		if s[0] != 0 {
			return fmt.Errorf("rma: rank %d could not create the window: %s", r, strings.TrimRight(string(s[1:]), "\x00"))
		}
	}
	return nil
}

// shmPrefix starts the name of every window file.
const shmPrefix = "knemesis-rma-"

// windowObject names a window's file in shmfile's errors.
const windowObject = "rma window file"

func createShm(name string, size int) (int, error) {
	fd, err := shmfile.Create(name, windowObject)
	if err != nil {
		return -1, fmt.Errorf("rma: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("rma: sizing window file %s to %d bytes: %w", name, size, err)
	}
	return fd, nil
}

// removeStale removes the window files whose creator is gone: a rank 0
// killed between creating one and unlinking it.
func removeStale(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, shmPrefix+"*"))
	for _, n := range names {
		i := strings.LastIndex(n, "-p")
		pid, err := strconv.Atoi(n[i+2:])
		if i < 0 || err != nil || pid <= 0 {
			continue
		}
		if unix.Kill(pid, 0) == unix.ESRCH {
			os.Remove(n)
		}
	}
}
