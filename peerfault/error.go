package peerfault

import (
	"errors"
	"fmt"
	"strings"
)

// The kinds of [*Error], to be tested with errors.Is.
var (
	// ErrCorrupt: a peer wrote a value that no correct peer writes (a
	// length past its payload, an offset outside its region, a counter
	// that went backwards): it is broken, hostile, or runs another
	// version of the protocol.
	ErrCorrupt = errors.New("a peer wrote a value that no correct peer writes")
	// ErrDead: a peer's process is gone, or can no longer be reached.
	ErrDead = errors.New("peer process is gone")
)

// Error is a peer's fault, as it reaches the requests that involve it.
type Error struct {
	Kind  error  // ErrCorrupt or ErrDead
	Rank  int    // the peer
	PID   int    // its process, 0 when not known
	Field string // what it wrote, such as "total of a fastbox"; empty for a death
	// Value is what was read of Field and Limit the protocol's bound it
	// broke, when the fault is a number out of bounds (Limit > 0).
	Value, Limit uint64
	Reason       string // what is wrong, in words
	Err          error  // the cause underneath, if any (a system error, a death report)
}

// Corrupt returns the *Error of a field that rank wrote wrong; the reason
// is formatted as fmt.Sprintf does.
func Corrupt(rank int, field, format string, args ...any) *Error {
	return &Error{Kind: ErrCorrupt, Rank: rank, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// OutOfBounds returns the *Error of a number, value, that rank wrote into
// field above the protocol's limit.
func OutOfBounds(rank int, field string, value, limit uint64) *Error {
	return &Error{Kind: ErrCorrupt, Rank: rank, Field: field, Value: value, Limit: limit,
		Reason: fmt.Sprintf("%d, above the limit of %d", value, limit)}
}

// Dead returns the *Error of rank's process pid (0: unknown), gone as
// reason says, found by err (may be nil).
func Dead(rank, pid int, reason string, err error) *Error {
	return &Error{Kind: ErrDead, Rank: rank, PID: pid, Reason: reason, Err: err}
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "knemesis: rank %d", e.Rank)
	if e.PID > 0 {
		fmt.Fprintf(&b, " (pid %d)", e.PID)
	}
	switch {
	case e.Kind == ErrCorrupt:
		fmt.Fprintf(&b, " wrote a corrupt %s: %s", e.Field, e.Reason)
	case e.Reason != "":
		fmt.Fprintf(&b, " is gone: %s", e.Reason)
	default:
		b.WriteString(" is gone")
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Is matches the kind, so that errors.Is(err, ErrCorrupt) holds for
// every *Error of that kind.
func (e *Error) Is(target error) bool { return target != nil && target == e.Kind }

// Unwrap returns the cause underneath.
func (e *Error) Unwrap() error { return e.Err }

// Fix says what to do about the fault.
func (e *Error) Fix() string {
	if e.Kind == ErrCorrupt {
		return fmt.Sprintf("the process of rank %d is broken or not a knemesis rank of this build: start every rank from the same binary, and look at rank %d first; the requests with it fail, the other pairs go on", e.Rank, e.Rank)
	}
	return fmt.Sprintf("rank %d exited or was killed before its requests completed: look at its exit status; the requests with it fail, the other pairs go on", e.Rank)
}
