package lmt

import (
	"encoding/binary"
	"fmt"
)

// Wire format of a control packet: a 32-byte header, then a payload (the
// backend handle in RTS and CTS, the error text in a failed DONE).
//
//	0 type  1 backend id  2 status  3 zero  4..8 payload length
//	8..16 the packet sender's transfer id (a successful DONE: the
//	      nanoseconds the move took on the side sending it, at least 1;
//	      for a Split transfer, the time its piece took)
//	16..24 the packet receiver's transfer id
//	24..32 length (RTS: message; CTS: bytes accepted; DONE: bytes moved,
//	      for a Split transfer by the side sending it)
const hdrLen = 32

type pktType uint8

const (
	pktRTS pktType = iota + 1
	pktCTS
	pktDone
)

func (p pktType) String() string {
	switch p {
	case pktRTS:
		return "RTS"
	case pktCTS:
		return "CTS"
	case pktDone:
		return "DONE"
	}
	return fmt.Sprintf("packet type %d", uint8(p))
}

const (
	statusOK     = 0
	statusFailed = 1
)

type header struct {
	typ      pktType
	kind     uint8
	status   uint8
	src, dst uint64
	length   int64
}

func putHeader(p []byte, typ pktType, kind, status uint8, n int, src, dst uint64, length int64) {
	le := binary.LittleEndian
	p[0], p[1], p[2], p[3] = byte(typ), kind, status, 0
	le.PutUint32(p[4:], uint32(n))
	le.PutUint64(p[8:], src)
	le.PutUint64(p[16:], dst)
	le.PutUint64(p[24:], uint64(length))
}

// parseHeader fills h from p, a packet rank wrote, and returns p's payload.
// It writes h in place rather than returning it: a returned header is built
// from byte stores and copied out with 16-byte loads, which the store buffer
// cannot forward: a stall on every packet of the receiver's path
// (docs/performance.md). Every field is checked, with one branch on the
// path of a good packet; badHeader names the field of a bad one.
func parseHeader(p []byte, h *header, rank int) ([]byte, error) {
	if len(p) < hdrLen {
		return nil, Corrupt(rank, "control packet", "%d bytes, shorter than the %d-byte header", len(p), hdrLen)
	}
	le := binary.LittleEndian
	h.typ, h.kind, h.status = pktType(p[0]), p[1], p[2]
	h.src, h.dst, h.length = le.Uint64(p[8:]), le.Uint64(p[16:]), int64(le.Uint64(p[24:]))
	n := uint64(le.Uint32(p[4:]))
	if h.typ-pktRTS > pktDone-pktRTS || p[3]|h.status&^statusFailed != 0 || n > uint64(len(p)-hdrLen) || h.length < 0 {
		return nil, badHeader(p, h, n, rank)
	}
	return p[hdrLen : hdrLen+int(n)], nil
}

// badHeader says which field of a header that parseHeader refused is wrong.
func badHeader(p []byte, h *header, n uint64, rank int) error {
	switch {
	case h.typ < pktRTS || h.typ > pktDone:
		return Corrupt(rank, "control packet type", "%d, not %d (RTS), %d (CTS) or %d (DONE)", p[0], pktRTS, pktCTS, pktDone)
	case p[3] != 0:
		return Corrupt(rank, "reserved byte of a control packet", "%d, not 0", p[3])
	case h.status > statusFailed:
		return Corrupt(rank, h.typ.String()+" status", "%d, not %d (ok) or %d (failed)", h.status, statusOK, statusFailed)
	case n > uint64(len(p)-hdrLen):
		return Corrupt(rank, h.typ.String()+" payload length", "%d bytes, but %d follow the header", n, len(p)-hdrLen)
	}
	return Corrupt(rank, h.typ.String()+" length", "%d, negative", h.length)
}

// IsRTS reports whether pkt is an RTS written by StartSend (for control
// channels that carry RTS and other packets alike).
func IsRTS(pkt []byte) bool { return len(pkt) >= hdrLen && pktType(pkt[0]) == pktRTS }
