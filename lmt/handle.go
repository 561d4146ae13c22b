package lmt

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// EncodeSegments writes a handle naming the non-empty buffers of t (its
// copy instead, once a [Copier] named one with SetCopy) in the process pid
// of PID namespace pidns (the inode of /proc/self/ns/pid): a pid means
// nothing, or another process, outside its namespace.
func EncodeSegments(t *Transfer, pid int, pidns uint64, dst []byte) (int, error) {
	if t.copied != nil {
		return encodeSegments(pid, pidns, dst, t.copied)
	}
	if t.dt.local != nil {
		return encodeTyped(t, pid, pidns, dst)
	}
	return encodeSegments(pid, pidns, dst, t.iov...)
}

func encodeSegments(pid int, pidns uint64, dst []byte, iov ...[]byte) (int, error) {
	n := nonEmpty(iov)
	need := segHandleLen(n)
	if need > len(dst) {
		return 0, fmt.Errorf("lmt: %d segments need a %d-byte handle, room for %d", n, need, len(dst))
	}
	putSegHeader(dst, pid, uint32(n), pidns)
	p := dst[16:]
	le := binary.LittleEndian
	for _, b := range iov {
		if len(b) == 0 {
			continue
		}
		le.PutUint64(p[0:], uint64(uintptr(unsafe.Pointer(&b[0]))))
		le.PutUint64(p[8:], uint64(len(b)))
		p = p[16:]
	}
	return need, nil
}

// putSegHeader writes a segment handle's header.
func putSegHeader(dst []byte, pid int, count uint32, pidns uint64) {
	le := binary.LittleEndian
	le.PutUint32(dst[0:], uint32(pid))
	le.PutUint32(dst[4:], count)
	le.PutUint64(dst[8:], pidns)
}

// DecodeSegments reads a handle written by EncodeSegments into t's remote
// buffer (a list of segments, or a datatype description over a base
// address) and returns the pid and its namespace, checking that the segments
// cover the length the transfer moves. The handle comes from the peer and
// is trusted in nothing: a field out of bounds is a [*CorruptError] naming
// the peer and the field, and t's remote buffer is left empty.
func DecodeSegments(t *Transfer, h []byte) (pid int, pidns uint64, err error) {
	t.remote = t.remote[:0]
	t.dt.hasRemote = false
	if len(h) < segHandleLen(0) {
		return 0, 0, Corrupt(t.peer, "segment handle", "%d bytes, shorter than its %d-byte header", len(h), segHandleLen(0))
	}
	le := binary.LittleEndian
	pid = int(le.Uint32(h[0:]))
	n := uint64(le.Uint32(h[4:]))
	pidns = le.Uint64(h[8:])
	switch {
	case pid <= 0 || pid > pidMaxLimit:
		return 0, 0, Corrupt(t.peer, "pid in a segment handle", "%d, outside 1..%d", pid, pidMaxLimit)
	case n == typeHandle:
		if err := decodeTyped(t, h); err != nil {
			return 0, 0, err
		}
		return pid, pidns, nil
	case n > uint64(t.e.cfg.MaxSegments):
		return 0, 0, Corrupt(t.peer, "segment count of a segment handle", "%d, above Config.MaxSegments %d", n, t.e.cfg.MaxSegments)
	case uint64(len(h)) < uint64(segHandleLen(int(n))):
		return 0, 0, Corrupt(t.peer, "segment handle", "%d bytes, %d segments need %d", len(h), n, segHandleLen(int(n)))
	}
	var total uint64
	for i := 0; i < int(n); i++ {
		s := Segment{Addr: le.Uint64(h[16+16*i:]), Len: le.Uint64(h[24+16*i:])}
		if s.Addr+s.Len < s.Addr || total+s.Len < total {
			t.remote = t.remote[:0]
			return 0, 0, segmentCorrupt(t.peer, i, s, total)
		}
		total += s.Len
		t.remote = append(t.remote, s)
	}
	if total < uint64(t.length) {
		t.remote = t.remote[:0]
		return 0, 0, Corrupt(t.peer, "segment handle", "its %d segments hold %d bytes, shorter than the %d to move", n, total, t.length)
	}
	return pid, pidns, nil
}

// pidMaxLimit is Linux's PID_MAX_LIMIT: no pid is larger on a 64-bit
// kernel.
const pidMaxLimit = 1 << 22

// segmentCorrupt names what is wrong with segment i of a handle: it wraps
// around the address space, or the lengths so far overflow 64 bits.
func segmentCorrupt(rank, i int, s Segment, total uint64) error {
	field := fmt.Sprintf("segment %d of a segment handle", i)
	if s.Addr+s.Len < s.Addr {
		return Corrupt(rank, field, "%d bytes at %#x wrap around the address space", s.Len, s.Addr)
	}
	return Corrupt(rank, field, "%d bytes after %d overflow a 64-bit total", s.Len, total)
}

func segHandleLen(n int) int { return 16 + 16*n }

func nonEmpty(iov [][]byte) int {
	n := 0
	for _, b := range iov {
		if len(b) > 0 {
			n++
		}
	}
	return n
}

func iovLen(iov [][]byte) int64 {
	var n int64
	for _, b := range iov {
		n += int64(len(b))
	}
	return n
}
