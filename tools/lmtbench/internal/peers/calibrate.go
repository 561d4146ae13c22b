package peers

import "time"

// Iterations is how many iterations of shape at size make a sample of
// about d: at the rate of last, the peer's previous sample of this shape
// and size, or when there is none (last.BytesPerSec == 0) at a first
// guess of 2 µs plus 2 GB/s per message, slow enough that the first
// sample of a size is not the long one. At least 10, at most 10^6.
func Iterations(shape string, size int, d time.Duration, last Measurement) int {
	perMsg := 2e-6 + float64(size)/2e9
	if last.BytesPerSec > 0 {
		perMsg = float64(size) / last.BytesPerSec
	}
	n := int(d.Seconds() / (perMsg * float64(MessagesPerIteration(shape))))
	return min(max(n, 10), 1_000_000)
}
