//go:build ofi

package ofinet

import (
	"time"

	"github.com/knemesis/knemesis/nemesis"
)

// IdlePoll is how often Idle looks for its message: rarely, since each
// look takes a core from the ranks that work, for a benchmark's sake as
// long as 8-byte round trips by the thousand.
const IdlePoll = 10 * time.Millisecond

// Idle waits for the message from src with tag and consumes it, without
// taking a core from the ranks that work meanwhile: a blocked call of a
// job with remote peers polls the module and yields, it cannot doze in
// the segment's futex, so a rank that sits out a benchmark probes every
// IdlePoll and sleeps in between. The message is taken with an empty
// buffer: send it empty.
func Idle(ep *nemesis.Endpoint, src, tag int) error {
	for {
		_, ok, err := ep.Iprobe(src, tag)
		if err != nil {
			return err
		}
		if ok {
			_, err := ep.Recv(src, tag, nil)
			return err
		}
		time.Sleep(IdlePoll)
	}
}
