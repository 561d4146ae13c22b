package coll

import (
	"errors"
	"fmt"
)

// Errors returned by the package, to be tested with errors.Is. The returned
// error wraps one of these (or a nemesis error) and says what was wrong.
var (
	// ErrInvalidArg: an argument is wrong on this rank alone (a length,
	// a count, a root, overlapping buffers).
	ErrInvalidArg = errors.New("coll: invalid argument")
	// ErrMismatch: the ranks called the operation differently (another
	// operation, element type, reduction or count); see *MismatchError.
	ErrMismatch = errors.New("coll: ranks disagree on the collective")
	// ErrAborted: another rank failed the same collective and said so;
	// see *AbortError.
	ErrAborted = errors.New("coll: collective failed on another rank")
	// ErrFreed: the communicator was freed.
	ErrFreed = errors.New("coll: communicator freed")
	// ErrBroken: an earlier collective on the communicator failed, so
	// the ranks no longer agree on where its traffic stands.
	ErrBroken = errors.New("coll: communicator broken by an earlier failure")
	// ErrNoContext: every context id is taken on some rank (Free unused
	// communicators).
	ErrNoContext = errors.New("coll: no context id free on every rank")
	// ErrTooManyPending: a communicator has as many nonblocking
	// collectives outstanding as its tags can tell apart.
	ErrTooManyPending = errors.New("coll: too many collectives outstanding on one communicator")
)

// Error says which collective failed, on which communicator and rank, and,
// when a transfer failed, with which peer.
type Error struct {
	Op   string // "Allreduce", "Split", ...
	Seq  uint32 // the collective's number on its communicator
	Comm int    // the communicator's context id
	Rank int    // this rank, in the communicator
	Peer int    // the peer's rank in the communicator, or -1
	// WorldPeer is the peer's rank in the job (the endpoint's), or -1.
	WorldPeer int
	// Origin is the job rank where the failure began, as far as this
	// rank knows: a rank that died, the rank that first reported a
	// disagreement (this one, when it found it), or this rank.
	Origin int
	Err    error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("coll: %s #%d on communicator %d (rank %d)", e.Op, e.Seq, e.Comm, e.Rank)
	if e.Peer >= 0 {
		s += fmt.Sprintf(", with rank %d (job rank %d)", e.Peer, e.WorldPeer)
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// MismatchError names the rank whose message disagreed with this rank's
// call, what differed, and both values.
type MismatchError struct {
	Field  string // "operation", "element type", "reduction", "bytes", "collective number"
	Theirs string
	Ours   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%v: %s %s there, %s here", ErrMismatch, e.Field, e.Theirs, e.Ours)
}

func (e *MismatchError) Unwrap() error { return ErrMismatch }

// AbortError is what a rank gets when a peer failed the collective first
// and told the others: Origin is the job rank at the root of the failure
// (a rank that crashed, or the first to find a mismatch), Cause what
// happened there.
type AbortError struct {
	From   int // job rank that sent the notice
	Origin int // job rank where the failure began
	Cause  string
	cause  uint8
}

func (e *AbortError) Error() string {
	return fmt.Sprintf("%v: job rank %d reports %s at job rank %d", ErrAborted, e.From, e.Cause, e.Origin)
}

func (e *AbortError) Unwrap() error { return ErrAborted }

func argErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArg}, args...)...)
}
