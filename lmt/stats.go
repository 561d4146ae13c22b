package lmt

import (
	"time"

	"github.com/knemesis/knemesis/internal/fastclock"
)

// Stats describe one transfer, on one side.
type Stats struct {
	Backend  string
	Bytes    int64 // payload bytes this side moved or saw moved
	Chunks   int   // Steps that moved data
	Syscalls int   // system calls made for the payload
	// Rails is, for a Split transfer, how many bytes each rail moved (by
	// [Rail]: the receiver's read, the sender's write), as each side
	// counted its own and the peer's DONE said; zero for other flows.
	// Their ratio is the cut the receiver chose.
	Rails [NumRails]int64
	// Staged is how many bytes of this side's datatype description went
	// through its staging buffer, the blocks shorter than
	// Config.SmallBlock: packed by a sender before its RTS, scattered by
	// a receiver once all was in (within the bytes it took). The rest of
	// Bytes moved in place, block by block. Zero for an iovec list.
	Staged int64
	// Early is how many bytes the sender put into the channel before
	// the CTS (see [Early]) and the receiver kept.
	Early int64
	// Elapsed runs from StartSend or StartRecv to completion on this
	// side.
	Elapsed time.Duration
	// Moving is how long the payload took to move, without the time the
	// message waited for its receive to be posted: for the receiver, and
	// for a sender whose receiver did the moving (its DONE carries it),
	// from the match to completion; for a pushing sender, from the CTS;
	// for the sender of a Split transfer, the receiver's time from the
	// match to its own piece in (the two pieces move at once).
	// A selector learning from measurements weighs this.
	Moving time.Duration
}

// monotonic is the engines' clock, read some five times per message:
// fastclock's, cheaper than time.Now (docs/performance.md).
func monotonic() time.Duration { return time.Duration(fastclock.Nanotime()) }
