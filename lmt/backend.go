package lmt

import (
	"fmt"

	"github.com/knemesis/knemesis/jobkey"
)

// Flow says which side moves the data and who finishes the transfer.
type Flow uint8

const (
	// Pull: the RTS carries the sender's handle, the receiver copies and
	// sends DONE (CMA read, KNEM).
	Pull Flow = iota + 1
	// Stream: after the receiver's CTS both sides Step, the sender putting
	// bytes into a shared channel and the receiver taking them out; the
	// receiver sends DONE. A channel carries one message at a time: a
	// receiver reads the messages of one peer and backend one after the
	// other, in the order it sent their CTSs (pipe, vmsplice, shm ring).
	Stream
	// Push: the CTS carries the receiver's handle, the sender copies and
	// sends DONE (CMA write).
	Push
	// Split: the RTS carries the sender's handle and the CTS the
	// receiver's with the cut; the receiver copies the first pieces of
	// the message (its read rail, and an [Offloader]'s where the backend
	// has one) while the sender copies the rest (its write rail), so that
	// both CPUs make one copy each at once (CMA read and write). Each
	// side's DONE says its pieces are in; a side completes when both
	// are. The cut is the half ([SplitPoint]) or, for a [Weighed]
	// backend, follows the rails' measured speeds.
	Split
)

// handleInRTS reports whether the sender's handle travels in the RTS.
func (f Flow) handleInRTS() bool { return f == Pull || f == Split }

// handleInCTS reports whether the receiver's handle travels in the CTS.
func (f Flow) handleInCTS() bool { return f == Push || f == Split }

// SplitPoint is where an unweighed Split transfer of length bytes changes
// hands: the receiver copies [0, SplitPoint), the sender the rest. Half,
// on a page boundary, so that neither side's copies share a page.
func SplitPoint(length int64) int64 { return length / 2 &^ 4095 }

func (f Flow) String() string {
	switch f {
	case Pull:
		return "pull"
	case Stream:
		return "stream"
	case Push:
		return "push"
	case Split:
		return "split"
	}
	return fmt.Sprintf("Flow(%d)", uint8(f))
}

// Side is the role of this process in a transfer.
type Side uint8

const (
	Sender Side = iota + 1
	Receiver
)

func (s Side) String() string {
	if s == Sender {
		return "sender"
	}
	return "receiver"
}

// A Backend moves the payload of transfers for one Engine. An Engine calls
// its methods from one goroutine, never concurrently. Its name, wire id and
// flow are its [Identity], declared once in this package; a backend package
// registers its implementation against that name ([Register]).
//
// The interface is shaped for one-sided mechanisms as well as two-sided
// ones: the knem backend returns its cookie from Handle (Flow Pull),
// submits the copy in Step and reports 0 bytes until its status word
// flips, then the whole length.
type Backend interface {
	// Check reports whether this process can use the backend with peer:
	// nil, or an *Unavailable saying why not and how to fix it.
	Check(peer Peer) error
	// Handle writes into dst what the peer needs to reach t's buffer (the
	// RTS payload for Pull and Split, the CTS payload for Push and Split)
	// and returns its length. Stream backends return 0.
	Handle(t *Transfer, dst []byte) (int, error)
	// SetPeerHandle gives t the handle its peer sent. h is only valid
	// during the call.
	SetPeerHandle(t *Transfer, h []byte) error
	// Start is called when t becomes active on this side, before the
	// first Step (the receiver of a Stream calls it before sending CTS, so
	// that the channel is open when the sender starts).
	Start(t *Transfer) error
	// Step moves at most max bytes of t from its cursor and returns how
	// many it moved; 0 with a nil error means "not now, try again".
	Step(t *Transfer, max int) (int, error)
	// Abort tells the backend that t failed, so that a shared channel left
	// with half a message is not reused.
	Abort(t *Transfer)
	// Close releases every resource of the backend.
	Close() error
}

// Early is implemented by Stream backends whose channel tags every piece
// with the transfer it belongs to (the shm ring). Their sender may start
// filling the channel as soon as its RTS is out, instead of a round trip
// later when the CTS arrives: the receiver finds the first bytes waiting.
// MPICH's shm LMT saves the same round trip by sending the first chunk with
// the RTS.
//
// The receiver discards pieces of any transfer other than the one it is
// reading (it matched a later message first), and Kept tells the sender, at
// the CTS, whether that happened: if so, the sender starts over.
type Early interface {
	// Prefill moves at most max bytes of t from its cursor into the
	// channel, before the CTS, without waiting for room. An error (the
	// channel is corrupt) fails t.
	Prefill(t *Transfer, max int) (int, error)
	// Kept reports, when t's CTS arrives, whether what Prefill moved is
	// still in the channel for the receiver.
	Kept(t *Transfer) bool
}

// Buffered is implemented by Stream backends whose channel holds a copy of
// what the sender put in (the shm ring; a pipe filled with writev). Once
// its last byte is in and the receiver has committed to the message with
// its CTS, the sender's buffer is free again, so the send completes for its
// user then, without the round trip to the receiver's DONE: MPICH completes
// its shm LMT sends when the last chunk is in the copy buffer. A stream
// sender then runs ahead by as much as the channel holds, not by one
// message per DONE. vmsplice answers false: its pipe references the
// sender's pages until the receiver has read them.
type Buffered interface {
	Buffered() bool
}

// Copier is implemented by Pull backends whose sender copies the message
// into memory of its own and names that copy in the RTS, not the caller's
// buffers (arena-copy: a slot of the sender's shared arena, which the
// receiver copies out of). Handle takes the copy, names it to the Transfer
// with [Transfer.SetCopy], may copy a first piece so that the receiver can
// start at once, and names the copy in the RTS. Progress then calls Fill,
// which copies up to max more bytes from the cursor, as Step does, and
// publishes how far the copy is filled for the receiver, until the whole
// message is in: the copy becomes the transfer's buffer and the send
// completes for its user, as an eager send completes once its bytes are in
// the cells, with no wait for the receiver's DONE, which only frees the
// copy. The receiver's Step copies what the copy holds so far: the two
// copies overlap. Release gives the copy back when the transfer leaves the
// Engine, however it ends (DONE, a failure, a dead peer, Close), once.
type Copier interface {
	Fill(t *Transfer, max int) (int, error)
	Releaser
}

// Releaser is implemented by backends that hold something for a transfer
// besides its buffers (net-read: the sender's registered regions, the
// receiver's reads): Release is called once when the transfer leaves the
// Engine, however it ends (DONE, a failure, a dead peer, Close), on
// either side — a Copier's on the sender's only. A transfer that moves
// to another backend at the CTS is released by the one it leaves.
type Releaser interface {
	Release(t *Transfer)
}

// Quiescer is implemented by backends whose operations may still write
// into a transfer's buffers after it failed: a one-sided read in flight
// (net-read's fi_read), which the network module completes, in error or
// not, at a later poll, and which hardware may land asynchronously until
// then. A transfer that fails (its Step's error, the peer's failed DONE,
// PeerFailed, Close) while Quiet is false is not completed for its user:
// it stays pending, failing, and a later Progress completes it with its
// error once Quiet is true; Abort, and not Release, has been called by
// then. Quiet reports whether no operation of t's is in flight any more;
// it is called from Progress (and Close), never from inside a backend
// call, and must not call the Engine. The backend must make every such
// operation end in a bounded time once its peer is lost (a provider
// cancels the reads of a closed connection), or t never completes. Quiet
// may be called after Close for transfers it was not quiet for then. A
// successful transfer never asks: its Step reports the bytes moved only
// once they are in.
type Quiescer interface {
	Quiet(t *Transfer) bool
}

// Ordered is implemented by Stream backends whose channel is a plain FIFO
// of bytes written by one sender and read by one receiver (a pipe): if
// senders push whole messages one after the other in the order of their
// CTSs, the receiver finds each message's bytes right after the previous
// one's. Its receiver then sends the CTS of every message it matched at
// once, instead of one when the message ahead has been read, so that a
// sender can fill the channel while the receiver still reads: in a stream
// of 64 KiB messages through a pipe the two copies, into the pipe and out
// of it, then overlap as they do between a plain writer and reader. The
// shm ring, which tags its pieces (see [Early]), fills ahead its own way.
type Ordered interface {
	Ordered() bool
}

// Chunker is implemented by backends whose Steps should move some other
// amount than Config.Chunk: the Engine passes each Step at most Chunk()
// bytes. The CMA backends ask for their chunk (cma.Settings), the pipes for a
// pipe-full.
type Chunker interface {
	Chunk() int
}

// Blocker is implemented by backends whose channel is a file descriptor
// (pipe, vmsplice): a waiter with nothing to do may sleep in poll(2) on it,
// and be woken by the kernel when the peer has made room or data, instead of
// spinning or yielding its time slice away.
type Blocker interface {
	// PollFd returns the descriptor t's next Step waits for and the
	// poll(2) events (POLLIN, POLLOUT), or fd -1.
	PollFd(t *Transfer) (fd int, events int16)
}

// Env is what a backend learns about its job when an Engine creates it.
type Env struct {
	Rank, Size int
	Job        string
	// Key is Config.Key: the job's key, from which the names of shared
	// objects take their unguessable part (Key.Name); zero when none.
	Key jobkey.Key
	// Dir is Config.Dir: a private directory for the job's named
	// objects, or "" when the caller gave none.
	Dir    string
	Config *Config
	// PeerPID returns the process id of rank, 0 when unknown.
	PeerPID func(rank int) int
}

// Peer identifies the process at the other end for an availability check.
type Peer struct {
	Rank int
	PID  int
}

// Unavailable says why a backend cannot be used and what would fix it.
type Unavailable struct {
	Backend string
	Peer    int // rank, -1 when the reason does not depend on the peer
	Reason  string
	Fix     string
	Err     error // the system error behind the reason, if any
}

func (u *Unavailable) Error() string {
	s := "lmt: backend " + u.Backend + " unavailable"
	if u.Peer >= 0 {
		s += fmt.Sprintf(" with rank %d", u.Peer)
	}
	s += ": " + u.Reason
	if u.Fix != "" {
		s += " (fix: " + u.Fix + ")"
	}
	return s
}

func (u *Unavailable) Unwrap() error { return u.Err }

// Check tells whether backend name can be used from this process with peer,
// with the default configuration. The error is an *Unavailable naming the
// reason and the fix, or says the backend is not registered.
func Check(name string, peer Peer) error {
	return CheckConfig(name, &Config{}, peer)
}

// CheckConfig is Check with a configuration (pipe sizes and limits).
func CheckConfig(name string, cfg *Config, peer Peer) error {
	r, ok := lookup(name)
	if !ok {
		return fmt.Errorf("lmt: no backend %q (registered: %v; import a backend's package to register it)", name, Backends())
	}
	if r.check == nil {
		return nil
	}
	c := *cfg
	c.setDefaults()
	return r.check(&c, peer)
}
