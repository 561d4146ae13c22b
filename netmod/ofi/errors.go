//go:build ofi

package ofi

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"syscall"
)

// Errors returned by the package, to be tested with errors.Is. The returned
// error wraps one of these and says what exactly was wrong.
var (
	ErrNoProvider   = errors.New("ofi: network module cannot start")
	ErrInvalidArg   = errors.New("ofi: invalid argument")
	ErrTruncated    = errors.New("ofi: message truncated")
	ErrTimeout      = errors.New("ofi: no progress")
	ErrPeerLost     = errors.New("ofi: connection to peer lost")
	ErrCanceled     = errors.New("ofi: operation canceled")
	ErrNoSlot       = errors.New("ofi: too many operations in flight")
	ErrRequestInUse = errors.New("ofi: request still pending")
	ErrClosed       = errors.New("ofi: endpoint closed")
)

// Errno is a libfabric error code (FI_E*, positive), as returned by its
// calls (negated) and its completion entries.
type Errno int

func (e Errno) Error() string {
	return fmt.Sprintf("%s (%d)", C.GoString(C.kn_strerror(C.int(e))), int(e))
}

// Is makes the codes of a broken connection match ErrPeerLost, and
// FI_ECANCELED ErrCanceled.
func (e Errno) Is(target error) bool {
	if target == ErrCanceled {
		return e == C.FI_ECANCELED
	}
	if target != ErrPeerLost {
		return false
	}
	switch syscall.Errno(e) {
	case syscall.ECONNRESET, syscall.ECONNABORTED, syscall.ECONNREFUSED,
		syscall.ENOTCONN, syscall.EPIPE, syscall.EHOSTUNREACH, syscall.ESHUTDOWN:
		return true
	}
	return false
}

// StartError says why a provider could not start: which one, at which
// call, what libfabric said, and which providers fi_getinfo offers here.
type StartError struct {
	Provider string
	Node     string
	Call     string // "fi_getinfo", "fi_domain", ...
	Err      Errno
	Offered  string // providers fi_getinfo offers for the same request
}

func (e *StartError) Error() string {
	msg := fmt.Sprintf("%v: provider %q on %s: %s: %v", ErrNoProvider, e.Provider, e.Node, e.Call, e.Err)
	if e.Offered != "" {
		return msg + "; fi_getinfo offers FI_EP_RDM with FI_TAGGED|FI_MSG|FI_RMA here from: " + e.Offered
	}
	return msg + "; fi_getinfo offers no provider for FI_EP_RDM with FI_TAGGED|FI_MSG|FI_RMA here"
}

func (e *StartError) Unwrap() []error { return []error{ErrNoProvider, e.Err} }

// PeerError says which peer an operation failed with.
type PeerError struct {
	Peer    string // the label given to Insert
	Address string // the provider's address of the peer
	Op      string // "send", "receive", "read"
	Err     error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("ofi: %s with %s (%s): %v", e.Op, e.Peer, e.Address, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}
