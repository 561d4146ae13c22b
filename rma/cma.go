package rma

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// cmaChunk is what one process_vm_writev/readv moves at most: the
	// CMA backends' default chunk (cma.DefaultChunk), long enough to amortize the call,
	// short enough that the progress loop gets its turn.
	cmaChunk = 4 << 20
	// iovMax is IOV_MAX, the longest list one call accepts.
	iovMax = 1024
)

// copyCMA moves the next chunk of op with one process_vm_writev (put) or
// process_vm_readv (get) on the target's memory. more: chunks are left.
func (w *Window) copyCMA(op *Op) (bool, error) {
	e := w.e
	p := &w.peers[op.target]
	n := min(op.n-op.moved, cmaChunk)
	local := e.cmaLocal[:0]
	i, off := seek(op.iov, op.moved)
	got := 0
	for ; got < n && i < len(op.iov) && len(local) < iovMax; i, off = i+1, 0 {
		b := op.iov[i][off:]
		k := min(len(b), n-got)
		if k == 0 {
			continue
		}
		local = append(local, unix.Iovec{Base: &b[0], Len: uint64(k)})
		got += k
	}
	e.cmaRemote[0] = unix.RemoteIovec{Base: p.base + uintptr(op.off+op.moved), Len: got}
	trap := uintptr(unix.SYS_PROCESS_VM_WRITEV)
	if op.kind == opGet {
		trap = unix.SYS_PROCESS_VM_READV
	}
	// A raw call, as the LMT's: one chunk takes microseconds and never
	// waits for another process.
	r, _, errno := unix.RawSyscall6(trap, uintptr(p.pid),
		uintptr(unsafe.Pointer(&local[0])), uintptr(len(local)),
		uintptr(unsafe.Pointer(&e.cmaRemote[0])), 1, 0)
	switch errno {
	case 0:
	case unix.EINTR:
		return true, nil
	case unix.ESRCH:
		return false, targetGone(op.target, fmt.Errorf("no process %d: %w", p.pid, errno))
	default:
		return false, fmt.Errorf("rma: cma with rank %d (pid %d): %w", op.target, p.pid, errno)
	}
	if r == 0 {
		return false, fmt.Errorf("rma: cma with rank %d (pid %d) moved nothing of %d bytes", op.target, p.pid, got)
	}
	op.moved += int(r)
	return op.moved < op.n, nil
}
