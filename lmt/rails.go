package lmt

import (
	"encoding/binary"
	"time"
)

// The rails of a Split transfer. A Split message is cut in pieces, one
// per rail, and every rail copies its piece at once: the receiver reads
// its piece out of the sender's memory while the sender writes its own
// into the receiver's, two CPUs each making one copy. Where a backend has
// an [Offloader] (multirail-knem: the knem module) the receiver also has
// the kernel copy a piece asynchronously, its kernel thread or a DMA
// channel being a third copier; where it has a [Ringer] (multirail-shm:
// the pair's shm ring) the sender also copies a piece into the ring while
// the receiver copies it out (rails_ring.go). cma-split cuts in halves; a
// [Weighed] backend (multirail, multirail-knem, multirail-shm) cuts by
// the speed the receiver's engine measured of each rail with that peer,
// so that the pieces finish together, as NewMadeleine sizes the pieces of
// a message split over heterogeneous rails (Aumage, Brunet, Furmento,
// Namyst, "NewMadeleine: a Fast Communication Scheduling Engine for High
// Performance Networks", CAC 2007).
//
// The receiver decides the cut, since it alone knows how much it accepts
// and which rails it can drive, and its CTS carries it as the list of
// boundaries between the pieces (boundsLen bytes before the handle); the
// sender checks it against the length and the rails it offered before
// copying a byte. Each side's DONE says how many bytes its rails moved and
// how long that took; the receiver folds the speeds into what it knows of
// the rails with that peer.

// Rail is one way a piece of a Split message moves.
type Rail uint8

const (
	// ReadRail: the receiver copies its piece out of the sender's
	// memory (process_vm_readv).
	ReadRail Rail = iota
	// WriteRail: the sender copies its piece into the receiver's memory
	// (process_vm_writev).
	WriteRail
	// KnemRail: the receiver has the knem module copy its piece out of
	// the region the sender declared, asynchronously, on the module's
	// kernel thread or a DMA channel, while it reads its own piece.
	KnemRail
	// RingRail: the sender copies its piece into the pair's shared
	// ring, a slot at a time, while the receiver copies the slots out:
	// a double copy, pipelined, beside the two CMA pieces.
	RingRail
	// NumRails is how many kinds of rail there are.
	NumRails
)

func (r Rail) String() string {
	switch r {
	case ReadRail:
		return "read"
	case WriteRail:
		return "write"
	case RingRail:
		return "ring"
	}
	return Knem
}

// railOrder is the order of the pieces in a message: the receiver's rails
// first, so that each side's cursor runs over its own piece in one go (the
// receiver's read, the sender's write), then the ring's piece, which both
// sides drive with a cursor of its own and count once their own is in.
var railOrder = [NumRails]Rail{ReadRail, KnemRail, WriteRail, RingRail}

// receiverRails are the rails whose pieces the receiver's DONE reports and
// whose end it sees: all but the sender's write.
var receiverRails = [...]Rail{ReadRail, KnemRail, RingRail}

// railSet is a set of rails: those a message goes over.
type railSet uint8

func (s railSet) has(r Rail) bool { return s&(1<<r) != 0 }

// twoRails are the rails every Split message has.
const twoRails = railSet(1<<ReadRail | 1<<WriteRail)

// offloadMin is the shortest message that gets an Offloader's piece: one
// sixteenth of it (minShareDiv) is then a 16 KiB piece, which a submitted
// copy still moves faster than it costs; below, the status-slot round
// trip would cost more than the piece (knemlmt's DefaultAsyncMin
// measures the same trade for a whole message).
const offloadMin = 256 << 10

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

// minShareDiv bounds the cut: no rail gets less than 1/minShareDiv of a
// message, so that a rail measured slow once is measured again.
const minShareDiv = 16

// bounds is the cut of a Split message: bounds[i] is where the piece of
// railOrder[i] ends and the next one's begins; the last rail's piece runs
// to the end. A rail outside the message's rails has an empty piece.
// Every boundary lies on a page but those at the end of the message.
type bounds [NumRails - 1]int64

// piece returns the bytes [from, to) of rail r's piece in a length-byte
// message.
func (b *bounds) piece(r Rail, length int64) (from, to int64) {
	for i, o := range railOrder {
		if i < len(b) {
			to = b[i]
		} else {
			to = length
		}
		if o == r {
			return from, to
		}
		from = to
	}
	return 0, 0
}

// receiverLen is how many bytes the receiver's rails move of a
// length-byte message: all but the sender's write piece.
func (b *bounds) receiverLen(length int64) int64 {
	from, to := b.piece(WriteRail, length)
	return length - (to - from)
}

// cut returns the bounds of a length-byte message over the rails in: each
// rail's share of the speed measured of those rails, none less than
// 1/minShareDiv; equal shares when the backend is not weighed or a rail
// of in is unmeasured ([SplitPoint] for two rails). Each boundary lies on
// a page boundary, so that two copiers never share a page, but the end of
// the last piece, which is the message's.
func (r *railRates) cut(length int64, weighed bool, in railSet) bounds {
	var w [NumRails]float64
	for rail := range NumRails {
		if !in.has(rail) {
			continue
		}
		w[rail] = 1
		if weighed && r[rail] <= 0 {
			weighed = false
		}
	}
	if weighed {
		for rail := range NumRails {
			if in.has(rail) {
				w[rail] = r[rail]
			}
		}
	}
	p := spread(&w, in, length)
	var b bounds
	at := 0.0
	for i := range b {
		at += p[railOrder[i]]
		b[i] = int64(at) &^ 4095
		if !in.anyOf(railOrder[i+1:]) {
			b[i] = length // no piece follows: the last one runs to the end
		}
	}
	return b
}

// anyOf reports whether s has any of rails.
func (s railSet) anyOf(rails []Rail) bool {
	for _, r := range rails {
		if s.has(r) {
			return true
		}
	}
	return false
}

// spread shares length bytes between the rails of in by their weights w,
// giving none less than length/minShareDiv: a rail whose share falls
// below gets that floor, and the others share the rest, until none does.
func spread(w *[NumRails]float64, in railSet, length int64) (p [NumRails]float64) {
	floor := float64(length / minShareDiv)
	var fixed railSet
	for range NumRails {
		left, total := float64(length), 0.0
		for rail := range NumRails {
			switch {
			case !in.has(rail):
			case fixed.has(rail):
				left -= floor
			default:
				total += w[rail]
			}
		}
		again := false
		for rail := range NumRails {
			if !in.has(rail) || fixed.has(rail) {
				continue
			}
			if p[rail] = left * w[rail] / total; p[rail] < floor {
				fixed |= 1 << rail
				again = true
			}
		}
		if !again {
			break
		}
	}
	for rail := range NumRails {
		if fixed.has(rail) {
			p[rail] = floor
		}
	}
	return p
}

// boundsLen is the size of the cut in a Split CTS, before the handle: one
// 64-bit boundary between each two rails' pieces.
const boundsLen = 8 * len(bounds{})

func putBounds(p []byte, b *bounds) {
	for i, v := range b {
		binary.LittleEndian.PutUint64(p[8*i:], uint64(v))
	}
}

// readBounds takes the cut from a Split CTS for a sender of t.Len() bytes
// that offered the rails in, and returns the handle behind it. The peer
// wrote it: a boundary outside the message or before the one before it,
// or a piece for a rail not offered, is a [*CorruptError].
func readBounds(t *Transfer, p []byte, in railSet) (bounds, []byte, error) {
	var b bounds
	if len(p) < boundsLen {
		return b, nil, Corrupt(t.peer, "split CTS", "%d bytes of payload, shorter than its %d-byte cut", len(p), boundsLen)
	}
	for i := range b {
		b[i] = int64(binary.LittleEndian.Uint64(p[8*i:]))
	}
	from := int64(0)
	for i, rail := range railOrder {
		to := t.length
		if i < len(b) {
			to = b[i]
		}
		switch {
		case to < 0 || to > t.length:
			return bounds{}, nil, Corrupt(t.peer, "cut of a split CTS", "the %s rail's piece ends at byte %d, outside the %d-byte message", rail, to, t.length)
		case to < from:
			return bounds{}, nil, Corrupt(t.peer, "cut of a split CTS", "the %s rail's piece ends at byte %d, before it begins at byte %d", rail, to, from)
		case to > from && !in.has(rail):
			return bounds{}, nil, Corrupt(t.peer, "cut of a split CTS", "a %d-byte piece for the %s rail, which this sender did not offer", to-from, rail)
		}
		from = to
	}
	return b, p[boundsLen:], nil
}
