package rma

import (
	"errors"
	"fmt"
)

// Errors to be tested with errors.Is; the error returned wraps one of them
// and says what exactly was wrong.
var (
	ErrInvalidArg = errors.New("rma: invalid argument")
	ErrOpInUse    = errors.New("rma: operation still in flight")
	ErrInFlight   = errors.New("rma: window has operations in flight")
	ErrFreed      = errors.New("rma: window freed")
	ErrAlignment  = errors.New("rma: atomic on a word that is not 8-byte aligned")
	ErrCorrupt    = errors.New("rma: malformed active message")
)

// RangeError is an access outside a rank's part of a window. Nothing was
// written.
type RangeError struct {
	Target int // the rank whose part was addressed
	Offset int // first byte asked for
	Len    int // bytes asked for
	Size   int // bytes the target's part holds
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("rma: %d bytes at offset %d lie outside the %d-byte window of rank %d", e.Len, e.Offset, e.Size, e.Target)
}

// TargetError fails an operation whose target is gone. Err is what found
// it gone: a *nemesis.PeerError, or the system error of a copy into a
// process that no longer exists.
type TargetError struct {
	Rank int
	Err  error
}

func (e *TargetError) Error() string {
	return fmt.Sprintf("rma: target rank %d is gone: %v", e.Rank, e.Err)
}
func (e *TargetError) Unwrap() error { return e.Err }

func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}
