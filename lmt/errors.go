package lmt

import (
	"errors"
	"fmt"
)

// Errors a transfer may complete with; test them with errors.Is.
var (
	ErrTruncated = errors.New("lmt: message truncated")
	ErrPeerGone  = errors.New("lmt: peer process is gone")
	ErrClosed    = errors.New("lmt: engine closed")
)

// TruncationError completes a receive whose buffers were shorter than the
// message: the first Cap bytes were delivered, nothing past them written.
type TruncationError struct{ Len, Cap int64 }

func (e *TruncationError) Error() string {
	return fmt.Sprintf("lmt: message of %d bytes truncated to the %d-byte receive buffer", e.Len, e.Cap)
}
func (e *TruncationError) Is(target error) bool { return target == ErrTruncated }

// PeerError completes a transfer whose peer process died.
type PeerError struct {
	Rank, PID int
	Err       error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("lmt: peer rank %d (pid %d) is gone: %v", e.Rank, e.PID, e.Err)
}
func (e *PeerError) Is(target error) bool { return target == ErrPeerGone }
func (e *PeerError) Unwrap() error        { return e.Err }

// RemoteError completes a transfer that the peer's Engine failed.
type RemoteError struct {
	Rank int
	Msg  string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("lmt: rank %d failed the transfer: %s", e.Rank, e.Msg)
}

// ErrCorrupt matches every [*CorruptError].
var ErrCorrupt = errors.New("lmt: a peer wrote a value that cannot be right")

// CorruptError reports a value written by a peer (a control packet field, a
// backend handle, a counter of a ring in shared memory) that no correct
// peer writes: that peer is broken, or its memory was overwritten. The
// engine trusts nothing a peer wrote; such a value fails the transfer (or
// the packet) instead of driving a copy, a loop or an index.
type CorruptError struct {
	Rank   int    // the peer that wrote it
	Field  string // what it is, such as "segment count of a cma handle"
	Reason string // what is wrong with it, with the value
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("lmt: rank %d wrote a corrupt %s: %s", e.Rank, e.Field, e.Reason)
}
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Corrupt returns a *CorruptError about field, written by rank, formatting
// the reason as fmt.Sprintf does. Backends use it for what they decode.
func Corrupt(rank int, field, format string, args ...any) error {
	return &CorruptError{Rank: rank, Field: field, Reason: fmt.Sprintf(format, args...)}
}
