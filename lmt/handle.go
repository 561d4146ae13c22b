package lmt

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// EncodeSegments writes a handle naming the non-empty buffers of t in the
// process pid of PID namespace pidns (the inode of /proc/self/ns/pid): a pid
// means nothing, or another process, outside its namespace.
func EncodeSegments(t *Transfer, pid int, pidns uint64, dst []byte) (int, error) {
	n := nonEmpty(t.iov)
	need := segHandleLen(n)
	if need > len(dst) {
		return 0, fmt.Errorf("lmt: %d segments need a %d-byte handle, room for %d", n, need, len(dst))
	}
	le := binary.LittleEndian
	le.PutUint32(dst[0:], uint32(pid))
	le.PutUint32(dst[4:], uint32(n))
	le.PutUint64(dst[8:], pidns)
	p := dst[16:]
	for _, b := range t.iov {
		if len(b) == 0 {
			continue
		}
		le.PutUint64(p[0:], uint64(uintptr(unsafe.Pointer(&b[0]))))
		le.PutUint64(p[8:], uint64(len(b)))
		p = p[16:]
	}
	return need, nil
}

// DecodeSegments reads a handle written by EncodeSegments into t's remote
// buffer and returns the pid and its namespace, checking that the segments
// cover the length the transfer moves.
func DecodeSegments(t *Transfer, h []byte) (pid int, pidns uint64, err error) {
	if len(h) < 16 {
		return 0, 0, fmt.Errorf("lmt: segment handle of %d bytes is too short", len(h))
	}
	le := binary.LittleEndian
	pid = int(le.Uint32(h[0:]))
	n := int(le.Uint32(h[4:]))
	pidns = le.Uint64(h[8:])
	if n > t.e.cfg.MaxSegments || len(h) < segHandleLen(n) {
		return 0, 0, fmt.Errorf("lmt: segment handle claims %d segments in %d bytes", n, len(h))
	}
	t.remote = t.remote[:0]
	var total uint64
	for i := 0; i < n; i++ {
		s := Segment{Addr: le.Uint64(h[16+16*i:]), Len: le.Uint64(h[24+16*i:])}
		total += s.Len
		t.remote = append(t.remote, s)
	}
	if total < uint64(t.length) {
		return 0, 0, fmt.Errorf("lmt: peer buffer of %d bytes is shorter than the %d to move", total, t.length)
	}
	return pid, pidns, nil
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
