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
