package coll

import (
	"encoding/binary"
	"fmt"
)

// Every message starts with a header of hdrSize bytes, in its own iovec
// entry before the payload, so that the payload moves from and into the
// caller's slices as it is. The receiver checks it against its own call,
// so that ranks that call collectives differently get a MismatchError
// instead of wrong data or a hang:
//
//	0..3   the collective's number on the communicator
//	4      the collective (collBarrier...)
//	5      the element type (reflect.Kind; 0 for none)
//	6      the reduction (opSum...; 0 for none)
//	7      0: data, 1: failure notice
//	8..15  data: payload bytes; notice: origin job rank (8..11), cause (12)
//
// The header is a peer's data: it is decoded once from the receiver's own
// buffer into a hdr value, and only that copy is used.
const hdrSize = 16

type hdr struct {
	seq    uint32
	coll   uint8
	elem   uint8
	op     uint8
	notice uint8
	bytes  uint64 // data: payload length
	origin int32  // notice
	cause  uint8  // notice
}

func (h *hdr) put(b []byte) {
	binary.LittleEndian.PutUint32(b[0:], h.seq)
	b[4], b[5], b[6], b[7] = h.coll, h.elem, h.op, h.notice
	if h.notice != 0 {
		binary.LittleEndian.PutUint32(b[8:], uint32(h.origin))
		b[12] = h.cause
		return
	}
	binary.LittleEndian.PutUint64(b[8:], h.bytes)
}

func getHdr(b []byte) hdr {
	h := hdr{seq: binary.LittleEndian.Uint32(b[0:]), coll: b[4], elem: b[5], op: b[6], notice: b[7]}
	if h.notice != 0 {
		h.origin, h.cause = int32(binary.LittleEndian.Uint32(b[8:])), b[12]
	} else {
		h.bytes = binary.LittleEndian.Uint64(b[8:])
	}
	return h
}

// The collectives, as headers name them. The v forms share their plain
// form's code: MPI lets a rank call Gatherv where another calls Gather.
const (
	collNone uint8 = iota
	collBarrier
	collBcast
	collReduce
	collAllreduce
	collGather
	collScatter
	collAllgather
	collAlltoall
	collReduceScatter
	collScan
	collExscan
)

var collNames = [...]string{"none", "Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Scatter", "Allgather", "Alltoall", "ReduceScatter", "Scan", "Exscan"}

func collName(c uint8) string {
	if int(c) < len(collNames) {
		return collNames[c]
	}
	return fmt.Sprintf("unknown collective %d", c)
}

// Causes in failure notices.
const (
	causeCrash    uint8 = 1 // the origin died without closing its endpoint
	causeExit     uint8 = 2 // the origin closed its endpoint and exited
	causeMismatch uint8 = 3 // the origin found ranks disagreeing, or a bad argument
	causeError    uint8 = 4 // another error at the origin
	causePeerData uint8 = 5 // the origin wrote an impossible value in its shared lines
)

func causeName(c uint8) string {
	switch c {
	case causeCrash:
		return "a crash"
	case causeExit:
		return "an exit"
	case causeMismatch:
		return "a disagreement between ranks (count, type, operation or argument)"
	case causeError:
		return "a failure"
	case causePeerData:
		return "an impossible value in its shared lines"
	}
	return fmt.Sprintf("unknown cause %d", c)
}

// check compares the header of a received message, n bytes long in all
// (header included), with what this rank's call expects: room payload
// bytes. It returns nil when they agree.
func (q *Request) check(h hdr, n, room int) error {
	switch {
	case h.seq != q.seq:
		return &MismatchError{"collective number", fmt.Sprint(h.seq), fmt.Sprint(q.seq)}
	case h.coll != q.coll:
		return &MismatchError{"operation", collName(h.coll), collName(q.coll)}
	case h.elem != q.el.kind:
		return &MismatchError{"element type", kindName(h.elem), kindName(q.el.kind)}
	case h.op != q.op:
		return &MismatchError{"reduction", opName(h.op), opName(q.op)}
	case h.bytes != uint64(room) || n != hdrSize+room:
		return &MismatchError{"payload bytes", fmt.Sprint(n - hdrSize), fmt.Sprint(room)}
	}
	return nil
}
