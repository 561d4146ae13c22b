package lmt

import (
	"encoding/binary"
	"time"
)

// The rails of a Split transfer. A Split message is cut in pieces, one
// per rail, and every rail copies its piece at once: the receiver reads
// the first piece out of the sender's memory while the sender writes the
// rest into the receiver's, two CPUs each making one copy. cma-split cuts
// in halves; a [Weighed] backend (multirail) cuts by the speed the
// receiver's engine measured of each rail with that peer, so that the
// pieces finish together, as NewMadeleine sizes the pieces of a message
// split over heterogeneous rails (Aumage, Brunet, Furmento, Namyst,
// "NewMadeleine: a Fast Communication Scheduling Engine for High
// Performance Networks", CAC 2007).
//
// The receiver decides the cut, since it alone knows how much it accepts,
// and its CTS carries it (cutLen bytes before the handle); the sender
// checks it against the length before copying a byte. Each side's DONE
// says how many bytes its rail moved and how long that took; the receiver
// folds the two speeds into what it knows of the rails with that peer.

// Rail is one way a piece of a Split message moves.
type Rail uint8

const (
	// ReadRail: the receiver copies its piece out of the sender's
	// memory (process_vm_readv).
	ReadRail Rail = iota
	// WriteRail: the sender copies its piece into the receiver's memory
	// (process_vm_writev).
	WriteRail
	// NumRails is how many rails a Split transfer has.
	NumRails
)

func (r Rail) String() string {
	if r == ReadRail {
		return "read"
	}
	return "write"
}

// railOf is the rail the side drives.
func railOf(s Side) Rail {
	if s == Receiver {
		return ReadRail
	}
	return WriteRail
}

// Weighed is implemented by Split backends whose receiver cuts each
// message by the speeds its engine measured of the rails with the peer
// (multirail), seeded 1:1 while nothing is measured, instead of in halves
// (cma-split, whose fixed cut is the yardstick the weighed one is
// measured against).
type Weighed interface {
	Weighed() bool
}

// railRates is what an engine measured of the rails of the Split
// transfers it received from one peer: each rail's speed in bytes per
// nanosecond, a running average over recent messages; 0 until measured.
type railRates [NumRails]float64

// rateKeep is the weight of the past in the running average: a new
// message counts for 1/rateKeep, so that one disturbed message (a
// preempted copier) moves the cut by a quarter of its error, not all of it.
const rateKeep = 4

// learn folds a rail's piece of bytes moved in took into its rate.
func (r *railRates) learn(rail Rail, bytes int64, took time.Duration) {
	if bytes <= 0 || took <= 0 {
		return
	}
	v := float64(bytes) / float64(took)
	if r[rail] == 0 {
		r[rail] = v
		return
	}
	r[rail] += (v - r[rail]) / rateKeep
}

// minShareDiv bounds the cut: neither rail gets less than 1/minShareDiv of
// a message, so that a rail measured slow once is measured again.
const minShareDiv = 16

// cut returns where a length-byte message changes rails: the receiver's
// read rail takes [0, cut), the sender's write rail the rest. Unweighed,
// or before both rails are measured, it is [SplitPoint]. The cut is on a
// page boundary, so that the two copiers never share a page.
func (r *railRates) cut(length int64, weighed bool) int64 {
	read, write := r[ReadRail], r[WriteRail]
	if !weighed || read <= 0 || write <= 0 {
		return SplitPoint(length)
	}
	c := int64(float64(length) * (read / (read + write)))
	c = min(max(c, length/minShareDiv), length-length/minShareDiv)
	return c &^ 4095
}

// cutLen is the size of the cut in a Split CTS, before the handle.
const cutLen = 8

func putCut(p []byte, c int64) { binary.LittleEndian.PutUint64(p, uint64(c)) }

// readCut takes the cut from a Split CTS for a sender of length bytes and
// returns the handle behind it. The peer wrote it: a cut outside the
// message is a [*CorruptError].
func readCut(t *Transfer, p []byte) (int64, []byte, error) {
	if len(p) < cutLen {
		return 0, nil, Corrupt(t.peer, "split CTS", "%d bytes of payload, shorter than its %d-byte cut", len(p), cutLen)
	}
	c := int64(binary.LittleEndian.Uint64(p))
	if c < 0 || c > t.length {
		return 0, nil, Corrupt(t.peer, "cut of a split CTS", "byte %d, outside the %d-byte message", c, t.length)
	}
	return c, p[cutLen:], nil
}
