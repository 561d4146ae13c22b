package peers

import "time"

// The first guess of a message's cost, before a peer has measured any:
// deliberately pessimistic (slower than shared memory anywhere), so that
// the first sample of a size comes out short rather than long.
const (
	guessFixedSec    = 2e-6 // per message
	guessBytesPerSec = 2e9
)

// Iterations is how many iterations of shape at size make a sample of
// about d: at the rate of last, the peer's previous sample of this shape
// and size, or when there is none (last.BytesPerSec == 0) at the first
// guess above. At least 10, at most 10^6.
func Iterations(shape string, size int, d time.Duration, last Measurement) int {
	perMsg := guessFixedSec + float64(size)/guessBytesPerSec
	if last.BytesPerSec > 0 {
		perMsg = float64(size) / last.BytesPerSec
	}
	n := int(d.Seconds() / (perMsg * float64(MessagesPerIteration(shape))))
	return min(max(n, 10), 1_000_000)
}
