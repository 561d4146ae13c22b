package rma

import "encoding/binary"

// An active message is a fixed header followed by data (put and get
// payload). Every field is little-endian; the target checks each one
// before it touches its memory.
//
//	0  type        u8
//	1  flags       u8
//	4  window      u32   creation number, the same in every rank
//	8  offset      u64   in the target's part of the window
//	16 a           u64   length, operand, phase or count
//	24 tag         u32   notification tag
//	28 data length u32
//	32 b           u64   compare value, or the put's first offset
//	40 data
//
// A packet with no data and b zero (a notification, a get request, an
// acknowledgment) stops at byte 32, so that it fits the first cache line
// of a fastbox with the fastbox's own header: the notification of a small
// PutNotify then costs the target one line, as a small message does.
const (
	hdrLen   = 40
	shortLen = 32
)

// Packet types.
const (
	pktColl      = 1 // a collective step of window creation, fence or free
	pktPut       = 2 // put data, applied by the target
	pktNotify    = 3 // a notification, after data moved by another mechanism
	pktGet       = 4 // get request
	pktGetData   = 5 // get reply data
	pktAtomic    = 6 // atomic request
	pktAtomicRes = 7 // atomic reply: the previous value
	pktAck       = 8 // a: how many puts were applied
)

// Packet flags.
const (
	flagLast   = 1 << 0 // last packet of a put: the target acknowledges it
	flagNotify = 1 << 1 // the put is a PutNotify: tag follows it
	flagCAS    = 1 << 2 // atomic is a compare-and-swap, else fetch-and-add
)

type header struct {
	typ, flags uint8
	win        uint32
	off, a, b  uint64
	tag        uint32
	n          uint32
}

func (h *header) put(p []byte) {
	p[0], p[1], p[2], p[3] = h.typ, h.flags, 0, 0
	binary.LittleEndian.PutUint32(p[4:], h.win)
	binary.LittleEndian.PutUint64(p[8:], h.off)
	binary.LittleEndian.PutUint64(p[16:], h.a)
	binary.LittleEndian.PutUint32(p[24:], h.tag)
	binary.LittleEndian.PutUint32(p[28:], h.n)
	binary.LittleEndian.PutUint64(p[32:], h.b)
}

// size is the length of the packet of header h and its data: shortLen
// when it has neither data nor b.
func (h *header) size() int {
	if h.n == 0 && h.b == 0 {
		return shortLen
	}
	return hdrLen + int(h.n)
}

// parse reads a header and returns the data after it, or false when pkt
// is too short for what its header claims.
func (h *header) parse(p []byte) ([]byte, bool) {
	if len(p) < shortLen {
		return nil, false
	}
	h.typ, h.flags = p[0], p[1]
	h.win = binary.LittleEndian.Uint32(p[4:])
	h.off = binary.LittleEndian.Uint64(p[8:])
	h.a = binary.LittleEndian.Uint64(p[16:])
	h.tag = binary.LittleEndian.Uint32(p[24:])
	h.n = binary.LittleEndian.Uint32(p[28:])
	if len(p) == shortLen {
		h.b = 0
		return nil, h.n == 0
	}
	if len(p) < hdrLen {
		return nil, false
	}
	h.b = binary.LittleEndian.Uint64(p[32:])
	if uint64(h.n) != uint64(len(p)-hdrLen) {
		return nil, false
	}
	return p[hdrLen:], true
}
