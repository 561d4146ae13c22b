package nemesis

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/peerfault"
)

// Errors returned by the package, to be tested with errors.Is. The returned
// error wraps one of these and says what exactly was wrong.
var (
	ErrInvalidArg    = errors.New("nemesis: invalid argument")
	ErrInvalidRank   = errors.New("nemesis: invalid rank")
	ErrInvalidTag    = errors.New("nemesis: invalid tag")
	ErrTruncated     = errors.New("nemesis: message truncated")
	ErrPeerDead      = peerfault.ErrDead    // a *peerfault.Error names the rank
	ErrCorrupt       = peerfault.ErrCorrupt // a *peerfault.Error names the rank and field, when one wrote it
	ErrLayout        = errors.New("nemesis: shared segment layout mismatch")
	ErrStaleSegment  = errors.New("nemesis: stale shared segment")
	ErrJoinTimeout   = errors.New("nemesis: timed out joining job")
	ErrClosed        = errors.New("nemesis: endpoint closed")
	ErrRequestInUse  = errors.New("nemesis: request still pending")
	ErrNoLMT         = errors.New("nemesis: RTS received but no LMT is set")
	ErrSegmentInUse  = errors.New("nemesis: segment name in use by a live job")
	ErrNotSupported  = errors.New("nemesis: not supported")
	ErrProbeTimeout  = errors.New("nemesis: peer did not take part in the latency probe")
	ErrNoSpace       = errors.New("nemesis: not enough shared memory for the job") // see SpaceError
	errInternalState = errors.New("nemesis: internal state")
)

// PeerError says which rank's death or corrupt data failed an operation.
//
// Deprecated: it is [peerfault.Error], the same type in every layer; the
// name stays for the code that names it.
type PeerError = peerfault.Error

func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}

func truncErr(msgLen, bufLen int) error {
	return errorf(ErrTruncated, "message of %d bytes, receive buffer of %d", msgLen, bufLen)
}
