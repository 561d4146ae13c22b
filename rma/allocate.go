package rma

import (
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/nemesis"
)

// Allocate creates, collectively over ep's job, a window in which this
// rank's part is size bytes of new memory (zeroed), every rank passing its
// own size. All parts lie in one shared mapping of a file made for this
// window alone, so that every rank reaches every part directly: put and
// get are one user-space copy, atomics are CPU atomics, and a
// PutNotify's notification is written straight into a ring the target
// polls (ring.go).
//
// The memory is a sealed memfd, which no rank can shrink under the
// others or grow, handed by rank 0 to the others over a socket in a 0700
// directory of Options.Dir (/dev/shm) named from the job's key
// (internal/fdpass). The directory lives only while the ranks receive
// the window: rank 0 removes it as soon as every rank has mapped it, or
// as soon as creation fails. One left by a rank 0 killed in between holds
// no lock any more and is removed by the next Allocate on the machine.
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
	// The key's part keeps another user from guessing the name: from
	// making the directory first, or a link there (see internal/fdpass).
	name := filepath.Join(dir, fmt.Sprintf("%s%s-%s-w%d", shmPrefix, e.ep.Job(), e.ep.JobKey().Name("rma/window"), w.id))
	// Step 1: rank 0 makes the window, a sealed memfd, and serves it at
	// name. Step 2: the others receive and map it. Each step ends with
	// every rank's status, so that all fail together; then rank 0 stops
	// serving, which removes the name.
	var fd = -1
	var ferr error
	if e.rank == 0 {
		fdpass.Sweep(dir, shmPrefix, windowObject) // left by a rank 0 killed while serving
		var srv *fdpass.Server
		srv, fd, ferr = serveWindow(name, total)
		if ferr == nil {
			defer srv.Close()
		}
	}
	if err := w.agree(ferr); err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return err
	}
	if e.rank != 0 {
		fd, _, ferr = fdpass.Fetch(name, windowServed, windowObject, fdpass.Want{Size: int64(total)})
		if ferr != nil {
			ferr = fmt.Errorf("rma: %w", ferr)
		}
	}
	if ferr == nil {
		if testHookMapped != nil {
			testHookMapped(fd)
		}
		w.mem, ferr = unix.Mmap(fd, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		unix.Close(fd)
		if ferr != nil {
			ferr = fmt.Errorf("rma: mapping %d bytes of window %s: %w", total, name, ferr)
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

// shmPrefix starts the name of every window's handover directory.
const shmPrefix = "knemesis-rma-"

// windowObject names a window in the errors of fdpass.
const windowObject = "rma window"

// windowServed is the name rank 0 serves a window under.
const windowServed = "window"

// testHookMapped, when set by a test, sees the descriptor of the window
// each rank is about to map.
var testHookMapped func(fd int)

// serveWindow makes the window's memory, a sealed memfd of size bytes,
// and serves it at the directory name. The memfd is sealed so that no
// rank can shrink it under the others (SIGBUS) or grow it; its pages
// stay holes until first written, as those of a new mapping would, so
// that each part is allocated where its owner places it (placement.go).
func serveWindow(name string, size int) (*fdpass.Server, int, error) {
	srv, err := fdpass.Listen(name, windowObject)
	if err != nil {
		return nil, -1, fmt.Errorf("rma: %w", err)
	}
	fd, err := fdpass.NewSealedSparse("knemesis-rma-window", int64(size), partAlign)
	if err != nil {
		srv.Close()
		return nil, -1, fmt.Errorf("rma: %w", err)
	}
	if err := srv.Serve(windowServed, fd); err != nil {
		unix.Close(fd)
		srv.Close()
		return nil, -1, fmt.Errorf("rma: %w", err)
	}
	return srv, fd, nil
}
