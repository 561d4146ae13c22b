package datatype

import (
	"errors"
	"fmt"
)

// Errors returned by the package, to be tested with errors.Is. The returned
// error wraps one of these and says what exactly was wrong.
var (
	// ErrInvalid: a description that cannot be walked safely (negative or
	// overflowing lengths, overlapping or unordered blocks).
	ErrInvalid = errors.New("datatype: invalid description")
	// ErrEncoding: a wire encoding that does not decode to a valid
	// description within the receiver's limits. A decoding error wraps
	// ErrEncoding and, where the fields decoded but do not form a valid
	// description, also ErrInvalid.
	ErrEncoding = errors.New("datatype: malformed encoding")
	// ErrShortBuffer: a buffer smaller than the description needs.
	ErrShortBuffer = errors.New("datatype: buffer too short")
	// ErrRange: a cursor position outside the described bytes.
	ErrRange = errors.New("datatype: position out of range")
)

// FieldError names the field of a description that is wrong, with its
// value and what would make it right.
type FieldError struct {
	Kind   string // "contiguous", "vector", "indexed"
	Field  string // "count", "blockLen", "stride", "size", "lengths", "displacements", "extent"
	Index  int    // block index for per-block fields; -1 otherwise
	Value  int64
	Reason string // what is wrong and how to fix it
	Err    error  // ErrInvalid or ErrEncoding
}

func (e *FieldError) Error() string {
	field := e.Field
	if e.Index >= 0 {
		field = fmt.Sprintf("%s[%d]", e.Field, e.Index)
	}
	return fmt.Sprintf("%v: %s %s = %d: %s", e.Err, e.Kind, field, e.Value, e.Reason)
}

func (e *FieldError) Unwrap() error { return e.Err }

func invalid(kind, field string, index int, value int64, reason string) error {
	return &FieldError{Kind: kind, Field: field, Index: index, Value: value, Reason: reason, Err: ErrInvalid}
}

func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}
