package lmt

// Balancing a Split transfer. The receiver copies [0, split) while the
// sender copies the rest, and the transfer ends when the later of the two
// finishes. Halves are rarely equal work: the sender starts only once the
// CTS has reached it, and the two directions of CMA need not copy at the
// same speed (process_vm_readv fills local pages, process_vm_writev remote
// ones). So the receiver, which chooses the split and names it in the CTS,
// learns per peer how many nanoseconds a byte costs each side and how late
// the sender starts, and puts the split where both should finish together:
//
//	split·recv = lag + (length − split)·send
//
// The sender's DONE carries when its half started and ended, on
// CLOCK_MONOTONIC, which every process of the machine shares: the lag is
// then measured where it happens, not where the receiver next polls.

import (
	"time"

	"golang.org/x/sys/unix"
)

const (
	// The receiver's share is sent in 256ths: fine enough for any size
	// (0.4%), and it fits the CTS header's status byte, whose zero (a
	// peer that does not balance) means half.
	splitHalf = 128
	// Neither side copies less than an eighth: a model thrown off by a
	// preempted transfer must still measure both sides next time.
	splitMinShare = 32
	splitMaxShare = 224
	// Halves shorter than this mostly measure latencies, not copy speed.
	splitLearnMin = 16 << 10
	// Each measurement moves the model by an eighth of its error, and
	// counts for at most four times the current estimate, so that one
	// descheduled copy does not throw the split off for long.
	splitWeight = 1.0 / 8
	splitClip   = 4
)

// splitModel is what a receiver knows of the Split transfers from one peer.
type splitModel struct {
	recv, send float64 // nanoseconds per byte of each side's copy
	lag        float64 // nanoseconds from the CTS leaving to the sender's first byte
	samples    int
}

// share returns the receiver's part of a transfer of length bytes, in
// 256ths: half until a transfer has been measured.
func (m *splitModel) share(length int64) uint8 {
	if m.samples == 0 || length <= 0 {
		return splitHalf
	}
	split := (m.lag + float64(length)*m.send) / (m.recv + m.send)
	s := split * 256 / float64(length)
	return uint8(min(max(s, splitMinShare), splitMaxShare))
}

// learn takes one transfer's measurements: the receiver copied recvBytes in
// recvNs, the sender started lagNs after the CTS left and copied sendBytes
// in sendNs.
func (m *splitModel) learn(recvBytes int64, recvNs, lagNs float64, sendBytes int64, sendNs float64) {
	if recvBytes < splitLearnMin || sendBytes < splitLearnMin || recvNs <= 0 || sendNs <= 0 {
		return
	}
	recv, send, lag := recvNs/float64(recvBytes), sendNs/float64(sendBytes), max(lagNs, 0)
	if m.samples == 0 {
		m.recv, m.send, m.lag = recv, send, lag
		m.samples = 1
		return
	}
	m.recv += splitWeight * (min(recv, splitClip*m.recv) - m.recv)
	m.send += splitWeight * (min(send, splitClip*m.send) - m.send)
	m.lag += splitWeight * (min(lag, splitClip*max(m.lag, 1000)) - m.lag)
	m.samples++
}

// splitAt is the split point of a transfer of length bytes for a receiver
// share in 256ths (0: half), on a page boundary so that neither side's
// copies share a page.
func splitAt(length int64, share uint8) int64 {
	if share == 0 {
		share = splitHalf
	}
	return length * int64(share) / 256 &^ 4095
}

// epoch anchors the engines' timestamps; monoBase makes them
// CLOCK_MONOTONIC readings, comparable between the processes of a machine.
var (
	epoch    = time.Now()
	monoBase = func() time.Duration {
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
			return 0 // timestamps still order events within a process
		}
		return time.Duration(ts.Nano()) - time.Since(epoch)
	}()
)

func monotonic() time.Duration { return monoBase + time.Since(epoch) }
