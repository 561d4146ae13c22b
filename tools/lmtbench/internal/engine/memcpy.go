package engine

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/memcopy"
)

// The memcpy reference is the yardstick the toolkit's backends are read
// against: the receiver copies the message straight out of the sender's
// buffer, which lives in a mapping both processes share, and tells the
// sender when it is done. That is one user-space copy across the two cores
// and a cache-line handshake — what CMA and KNEM do, minus the system call,
// the page pinning and the page-table walk. No real job can use it (the
// sender's buffer would have to be allocated in the peer-visible mapping),
// so it is never the automatic choice; a backend close to it has nothing
// left to gain.
func init() {
	register(Backend{
		Name:        "memcpy",
		Summary:     "reference, not a backend: one user copy out of the sender's buffer mapped in both processes",
		Reference:   true,
		Check:       func() error { return nil },
		SharedBytes: memcpyShared,
		Open:        openMemcpy,
	})
}

const (
	pageSize = 4096
	lineSize = 128 // two cache lines: adjacent-line prefetch must not share a flag
)

// The control page holds, per sending rank, the posted message (ready
// sequence, offset, length) and the receiver's completion sequence, each on
// its own line so that the two sides never write the same line.
const (
	ctlReady = 0
	ctlDone  = lineSize
	ctlDir   = 2 * lineSize // per direction
)

func memcpyRegion(maxSize int) int { return (maxSize + pageSize - 1) / pageSize * pageSize }

func memcpyShared(maxSize int) int { return pageSize + 2*memcpyRegion(maxSize) }

type memcpyEngine struct {
	mem      []byte
	rank     int
	own      []byte // this rank's send region, readable by the peer
	peer     []byte // the peer's send region
	used     int    // bytes of own handed out by SendBuffer
	sendSeq  uint64
	recvSeq  uint64
	myReady  *atomic.Uint64
	myOff    *atomic.Uint64
	myLen    *atomic.Uint64
	myDone   *atomic.Uint64 // written by the peer when it has copied
	peerRdy  *atomic.Uint64
	peerOff  *atomic.Uint64
	peerLen  *atomic.Uint64
	peerDone *atomic.Uint64 // written by us when we have copied
}

func openMemcpy(p Peer) (Engine, error) {
	if p.Proc.Size != 2 {
		return nil, fmt.Errorf("memcpy: runs between exactly 2 processes, job has %d", p.Proc.Size)
	}
	size := memcpyShared(p.MaxSize)
	mem, err := unix.Mmap(int(p.Shared.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("memcpy: mapping %d shared bytes: %w", size, err)
	}
	region := memcpyRegion(p.MaxSize)
	e := &memcpyEngine{mem: mem, rank: p.Proc.Rank}
	e.own = mem[pageSize+e.rank*region : pageSize+(e.rank+1)*region]
	e.peer = mem[pageSize+(1-e.rank)*region : pageSize+(2-e.rank)*region]
	word := func(off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&mem[off])) }
	mine, theirs := e.rank*ctlDir, (1-e.rank)*ctlDir
	e.myReady, e.myOff, e.myLen, e.myDone = word(mine+ctlReady), word(mine+ctlReady+8), word(mine+ctlReady+16), word(mine+ctlDone)
	e.peerRdy, e.peerOff, e.peerLen, e.peerDone = word(theirs+ctlReady), word(theirs+ctlReady+8), word(theirs+ctlReady+16), word(theirs+ctlDone)
	return e, nil
}

func (e *memcpyEngine) SendBuffer(n int) ([]byte, error) {
	if e.used+n > len(e.own) {
		return nil, fmt.Errorf("memcpy: %d more bytes of send buffer exceed the %d mapped", n, len(e.own))
	}
	b := e.own[e.used : e.used+n : e.used+n]
	e.used += (n + 63) &^ 63
	return b, nil
}

// post publishes buf to the peer; buf must come from SendBuffer.
func (e *memcpyEngine) post(buf []byte) error {
	off := 0
	if len(buf) > 0 {
		off = int(uintptr(unsafe.Pointer(&buf[0])) - uintptr(unsafe.Pointer(&e.own[0])))
		if off < 0 || off+len(buf) > len(e.own) {
			return fmt.Errorf("memcpy: send buffer not from SendBuffer")
		}
	}
	e.sendSeq++
	e.myOff.Store(uint64(off))
	e.myLen.Store(uint64(len(buf)))
	e.myReady.Store(e.sendSeq)
	return nil
}

// take copies the peer's next message into buf and releases it.
func (e *memcpyEngine) take(buf []byte) error {
	e.recvSeq++
	spinUntil(e.peerRdy, e.recvSeq)
	off, n := int(e.peerOff.Load()), int(e.peerLen.Load())
	if n != len(buf) {
		return fmt.Errorf("memcpy: peer sent %d bytes, receiver expected %d", n, len(buf))
	}
	memcopy.Copy(buf, e.peer[off:off+n])
	e.peerDone.Store(e.recvSeq)
	return nil
}

func (e *memcpyEngine) Send(buf []byte) error {
	if err := e.post(buf); err != nil {
		return err
	}
	spinUntil(e.myDone, e.sendSeq)
	return nil
}

func (e *memcpyEngine) Recv(buf []byte) error { return e.take(buf) }

func (e *memcpyEngine) SendRecv(out, in []byte) error {
	if err := e.post(out); err != nil {
		return err
	}
	if err := e.take(in); err != nil {
		return err
	}
	spinUntil(e.myDone, e.sendSeq)
	return nil
}

func (e *memcpyEngine) Close() error { return unix.Munmap(e.mem) }

// spinYieldAfter bounds the pure spin: when both ranks are pinned to one
// CPU, a spinning waiter would burn its whole time slice before the peer
// could run, so after a short spin every probe gives the CPU away.
const spinYieldAfter = 1 << 12

// spinUntil waits for a word the peer writes. A dead peer does not hang
// it forever: the launcher kills the whole job when one rank dies.
func spinUntil(w *atomic.Uint64, want uint64) {
	for i := 0; w.Load() != want; i++ {
		if i >= spinYieldAfter {
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
}
