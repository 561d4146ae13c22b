package rma

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/peerfault"
)

// Errors to be tested with errors.Is; the error returned wraps one of them
// and says what exactly was wrong.
var (
	ErrInvalidArg = errors.New("rma: invalid argument")
	ErrOpInUse    = errors.New("rma: operation still in flight")
	ErrInFlight   = errors.New("rma: window has operations in flight")
	ErrFreed      = errors.New("rma: window freed")
	ErrAlignment  = errors.New("rma: atomic on a word that is not 8-byte aligned")
	ErrCorrupt    = peerfault.ErrCorrupt // a malformed packet or notification; a *peerfault.Error names the rank
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

// TargetError fails an operation whose target is gone or wrote corrupt
// data.
//
// Deprecated: it is [peerfault.Error], the same type in every layer; the
// name stays for the code that names it.
type TargetError = peerfault.Error

// targetGone is the error of an operation with rank, found gone by err: err
// itself when it already names rank (a death nemesis or the LMT reported).
func targetGone(rank int, err error) error {
	var pe *peerfault.Error
	if errors.As(err, &pe) && pe.Rank == rank {
		return err
	}
	return peerfault.Dead(rank, 0, "", err)
}

func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}
