// Package engine is what lmtbench measures: something that moves one
// message at a time between rank 0 and rank 1 of a two-process job (an
// Engine), or between all the ranks of a job for alltoall (a Multi).
//
// Each transfer mechanism of the toolkit (the Nemesis cell path "eager",
// every LMT backend of lmt.Identities, the one-sided windows of package
// rma, and the automatic choice "auto") is wrapped as a Backend, beside the "memcpy"
// reference; the harness drives every Backend the same way, so the numbers
// in one table differ only by the mechanism. A Backend that cannot work on
// this machine says why and how to fix it instead of producing numbers.
package engine

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// Engine moves messages between the two ranks of a job. One Engine lives in
// each rank; Send in one rank pairs with Recv in the other. Sizes always
// match: the harness sends exactly the size the peer expects.
type Engine interface {
	// SendBuffer returns an n-byte buffer that Send may transfer. Engines
	// that need their payload in particular memory (a mapping the peer
	// can read, registered pages) allocate it here; others return make.
	SendBuffer(n int) ([]byte, error)
	// Send transfers buf to the peer and returns when buf may be reused.
	Send(buf []byte) error
	// Recv receives the next message into buf.
	Recv(buf []byte) error
	// SendRecv sends out and receives in at the same time (both ranks
	// call it at once), the bidirectional ping-pong of Ben Fredj and
	// Renault's Myrinet communication-model study.
	SendRecv(out, in []byte) error
	// Close releases what Open acquired.
	Close() error
}

// RailReporter is implemented by engines whose messages a split backend
// may cut over rails (the LMT's cma-split, multirail and multirail-knem):
// Rails returns the bytes each rail (by lmt.Rail: the receiver's read, the
// sender's write, the knem module's copy) moved of the last message this
// rank received; zero when it was not split.
type RailReporter interface {
	Rails() [lmt.NumRails]int64
}

// Peer is what an Engine is opened with, in each rank.
type Peer struct {
	Proc    launch.Proc
	MaxSize int      // largest message the run will send
	CPUs    []int    // CPU of each rank, nil when unpinned
	Shared  *os.File // memory shared by both ranks, Backend.SharedBytes(MaxSize) long; the harness closes it
	// Alloc, when set, allocates the plain buffers an engine hands out
	// (SendBuffer, RecvBuffer) in the page size the run chose
	// (lmtbench --hugepages); nil means make.
	Alloc func(n int) ([]byte, error)
}

// plain returns alloc, or make when it is nil.
func plain(alloc func(int) ([]byte, error), n int) ([]byte, error) {
	if alloc == nil {
		return make([]byte, n), nil
	}
	return alloc(n)
}

// Backend describes one transfer mechanism lmtbench can measure.
type Backend struct {
	Name    string
	Summary string // one line for `lmtbench info`
	// Reference marks a yardstick that is not a toolkit backend and is
	// never the automatic choice.
	Reference bool
	// OnRequest keeps a backend out of the default sweep: it runs when
	// named in --backends, or by the commands it belongs to.
	OnRequest bool
	// Check returns nil when the backend works on this machine, else an
	// *Unavailable saying why and how to fix it.
	Check func() error
	// SharedBytes is how much shared memory Open expects in Peer.Shared.
	SharedBytes func(maxSize int) int
	// Open builds the rank's end of the engine.
	Open func(p Peer) (Engine, error)
}

// Unavailable says why a backend cannot run here and what would fix it.
type Unavailable struct {
	Backend string
	Reason  string // "/dev/knem missing"
	Fix     string // "load the module with modprobe knem"; may be empty
}

func (u *Unavailable) Error() string {
	if u.Fix == "" {
		return u.Backend + ": " + u.Reason
	}
	return u.Backend + ": " + u.Reason + " — " + u.Fix
}

// Explain returns why a backend is unavailable without repeating its name.
func Explain(err error) string {
	var u *Unavailable
	if errors.As(err, &u) {
		if u.Fix == "" {
			return u.Reason
		}
		return u.Reason + " — " + u.Fix
	}
	return err.Error()
}

// ErrUnknown is wrapped by Lookup's error for a name no backend has.
var ErrUnknown = errors.New("unknown backend")

// registry holds every backend lmtbench knows, built in or not, in the
// order tables list them: by copies made, the automatic choice, then the
// reference.
var registry []Backend

var order = slices.Concat([]string{"eager"}, lmtNames(), []string{"auto", "auto-arena", "auto-copy", "table", "memcpy"})

func register(b Backend) {
	registry = append(registry, b)
	rank := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(registry, func(a, b Backend) int { return rank(a.Name) - rank(b.Name) })
}

// All returns every known backend, available or not.
func All() []Backend { return append([]Backend(nil), registry...) }

// Names returns the names of every known backend.
func Names() []string {
	names := make([]string, len(registry))
	for i, b := range registry {
		names[i] = b.Name
	}
	return names
}

// Lookup finds a backend by name.
func Lookup(name string) (Backend, error) {
	for _, b := range registry {
		if b.Name == name {
			return b, nil
		}
	}
	return Backend{}, fmt.Errorf("%w %q (known: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
}
