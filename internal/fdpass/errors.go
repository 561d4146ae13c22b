package fdpass

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/shmfile"
)

// The kinds of [*Error], for errors.Is.
var (
	// ErrDirNotPrivate: the socket's directory is not a directory of this
	// euid that only it may enter (another user made it, or a link).
	ErrDirNotPrivate = errors.New("fdpass: socket directory is not private")
	// ErrPeerUID: the process at the other end runs as another uid.
	ErrPeerUID = errors.New("fdpass: peer runs as another user")
	// ErrBadFile: the descriptor received is not a sealed memfd of this
	// user of the expected size.
	ErrBadFile = errors.New("fdpass: received file is not a sealed memfd")
	// ErrNotServed: the server holds no object of that name.
	ErrNotServed = errors.New("fdpass: object not served")
	// ErrProtocol: a request or reply is malformed or too large.
	ErrProtocol = errors.New("fdpass: malformed message")
)

// Error is a refused handover.
type Error struct {
	Kind    error  // one of the Err values above
	Object  string // what the descriptor is for, such as "nemesis segment"
	Path    string // the socket
	PeerPID int    // the process at the other end; 0 when unknown
	PeerUID int    // its uid; -1 when unknown
	Reason  string
}

func (e *Error) Error() string {
	peer := "no peer"
	if e.PeerPID != 0 || e.PeerUID >= 0 {
		peer = fmt.Sprintf("peer pid %d uid %d", e.PeerPID, e.PeerUID)
	}
	return fmt.Sprintf("knemesis: handing over %s at %s (%s): %s; fix: %s", e.Object, e.Path, peer, e.Reason, e.fix())
}

// Is matches the error's kind; a directory that is not private is also
// shmfile.ErrNotPrivate, as a shared file that is not is.
func (e *Error) Is(target error) bool {
	return target == e.Kind || e.Kind == ErrDirNotPrivate && target == shmfile.ErrNotPrivate
}

func (e *Error) fix() string {
	switch e.Kind {
	case ErrDirNotPrivate:
		return "remove it (as root or its owner) and start the job again with a key of its own (launch.Run, PMIx, or KNEMESIS_JOB_KEY)"
	case ErrPeerUID:
		return "every rank of a job runs as one user; start them all as the same one"
	case ErrNotServed, ErrProtocol:
		return "the ranks run different versions of knemesis or different job settings; start them from one build with one configuration"
	}
	return "a process of this user tampered with the job's shared memory; run the job again"
}
