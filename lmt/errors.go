package lmt

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/peerfault"
)

// Errors a transfer may complete with; test them with errors.Is.
var (
	ErrTruncated = errors.New("lmt: message truncated")
	ErrPeerGone  = peerfault.ErrDead // a *peerfault.Error names the rank
	ErrClosed    = errors.New("lmt: engine closed")
)

// TruncationError completes a receive whose buffers were shorter than the
// message: the first Cap bytes were delivered, nothing past them written.
type TruncationError struct{ Len, Cap int64 }

func (e *TruncationError) Error() string {
	return fmt.Sprintf("lmt: message of %d bytes truncated to the %d-byte receive buffer", e.Len, e.Cap)
}
func (e *TruncationError) Is(target error) bool { return target == ErrTruncated }

// PeerError completes a transfer whose peer process died, or wrote a
// corrupt value.
//
// Deprecated: it is [peerfault.Error], the same type in every layer; the
// name stays for the backends and tests that name it.
type PeerError = peerfault.Error

// RemoteError completes a transfer that the peer's Engine failed.
type RemoteError struct {
	Rank int
	Msg  string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("lmt: rank %d failed the transfer: %s", e.Rank, e.Msg)
}

// ErrCorrupt matches every corrupt value a peer wrote: a
// *peerfault.Error of that kind names the rank and the field.
var ErrCorrupt = peerfault.ErrCorrupt

// CorruptError reports a value written by a peer (a control packet field, a
// backend handle, a counter of a ring in shared memory) that no correct
// peer writes: that peer is broken, or its memory was overwritten. The
// engine trusts nothing a peer wrote; such a value fails the transfer (or
// the packet) instead of driving a copy, a loop or an index.
//
// Deprecated: it is [peerfault.Error]; the name stays for the code that
// names it.
type CorruptError = peerfault.Error

// Corrupt returns the error about field, written by rank, formatting the
// reason as fmt.Sprintf does. Backends use it for what they decode.
func Corrupt(rank int, field, format string, args ...any) error {
	return peerfault.Corrupt(rank, field, format, args...)
}
