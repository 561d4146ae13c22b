package rma

import (
	"unsafe"

	"github.com/knemesis/knemesis/internal/memcopy"
)

// sendAM sends op's request as active messages: a put's data in as many
// packets as it takes (the last one asks for the acknowledgment and
// carries a PutNotify's tag), or a get's request. more: no cell was free.
func (w *Window) sendAM(op *Op) (bool, error) {
	e := w.e
	if op.kind == opGet {
		h := header{typ: pktGet, win: w.id, off: uint64(op.off), a: uint64(op.n)}
		ok, err := e.send(op.target, &h, nil)
		return !ok && err == nil, err
	}
	for op.moved < op.n {
		k := min(op.n-op.moved, e.maxData())
		h := header{typ: pktPut, win: w.id, off: uint64(op.off + op.moved), b: uint64(op.off), n: uint32(k)}
		if op.moved+k == op.n {
			h.flags = flagLast
			if op.notify {
				h.flags |= flagNotify
				h.tag = uint32(op.tag)
			}
		}
		h.put(e.pkt)
		gather(e.pkt[hdrLen:hdrLen+k], op.iov, op.moved)
		ok, err := e.ep.SendAM(op.target, e.pkt[:hdrLen+k])
		if err != nil || !ok {
			return !ok && err == nil, err
		}
		op.moved += k
	}
	op.notify = false // it went with the last packet
	return false, nil
}

// serve executes an active message from src on this rank's part of the
// window, checking every offset and length first: nothing outside the
// part is ever touched. It may run before this rank's creation of the
// window has returned (a peer that finished it first may start at once):
// it uses w.local only, which is set before the last collective step.
func (w *Window) serve(src int, h *header, data []byte) error {
	e := w.e
	switch h.typ {
	case pktPut:
		if !w.inside(h.off, uint64(len(data))) || h.flags&flagLast != 0 && h.b > h.off {
			return errorf(ErrCorrupt, "put of %d bytes at %d from rank %d, window of %d", len(data), h.off, src, len(w.local))
		}
		memcopy.Copy(w.local[h.off:], data)
		if h.flags&flagLast == 0 {
			return nil
		}
		if h.flags&flagNotify != 0 {
			end := int(h.off) + len(data)
			w.notes.push(Notification{Source: src, Tag: int(h.tag), Offset: int(h.b), Len: end - int(h.b)})
		}
		return e.owe(src, reply{typ: pktAck, val: 1})
	case pktNotify:
		if !w.inside(h.off, h.a) {
			return errorf(ErrCorrupt, "notification of %d bytes at %d from rank %d, window of %d", h.a, h.off, src, len(w.local))
		}
		w.notes.push(Notification{Source: src, Tag: int(h.tag), Offset: int(h.off), Len: int(h.a)})
		return nil
	case pktGet:
		if !w.inside(h.off, h.a) {
			return errorf(ErrCorrupt, "get of %d bytes at %d from rank %d, window of %d", h.a, h.off, src, len(w.local))
		}
		return e.owe(src, reply{typ: pktGetData, win: w.id, off: int(h.off), n: int(h.a)})
	case pktAtomic:
		if !w.inside(h.off, 8) || (uintptr(unsafe.Pointer(unsafe.SliceData(w.local)))+uintptr(h.off))%8 != 0 {
			return errorf(ErrCorrupt, "atomic at %d from rank %d, window of %d", h.off, src, len(w.local))
		}
		old := apply(w.local, int(h.off), h.flags&flagCAS != 0, h.a, h.b)
		return e.owe(src, reply{typ: pktAtomicRes, val: old})
	}
	return errorf(ErrCorrupt, "packet of unknown type %d from rank %d", h.typ, src)
}

// inside reports whether n bytes at off lie in this rank's part.
func (w *Window) inside(off, n uint64) bool {
	size := uint64(len(w.local))
	return off <= size && n <= size-off
}
