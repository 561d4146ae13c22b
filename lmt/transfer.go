package lmt

import (
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"

	"github.com/knemesis/knemesis/internal/memcopy"
	"golang.org/x/sys/unix"
)

// Transfer is one large message on one side. Backends read and move its
// cursor through the methods below; users read Done, Err and Stats.
type Transfer struct {
	// User is free for the caller (the Nemesis adapter hangs its request
	// here).
	User any

	e      *Engine
	s      *backendSlot
	id     uint64 // ours
	peerID uint64 // the peer Engine's id for the same transfer
	peer   int
	side   Side
	state  tstate
	err    error

	iov    [][]byte
	msgLen int64 // the sender's length
	length int64 // what this transfer moves: min(msgLen, receive capacity)
	moved  int64
	seg    int // cursor: iov[seg][off:] is next
	off    int

	remote []Segment // the peer's buffer, for one-sided backends
	rseg   int
	roff   uint64

	stats      Stats
	idleVisits int
	grantedIn  uint64        // Engine.pass in which grantNext activated this receiver
	started    time.Duration // monotonic(), at StartSend or StartRecv
	moveStart  time.Duration // when the payload could start moving
	early      bool          // a sender filling its channel before the CTS
	peerDone   bool          // a Split transfer whose peer has copied its half
	doneOwed   bool          // a Split receiver whose DONE waits for its CTS to leave
	pushing    bool          // a sender with bytes not yet in its channel
	handedBack bool          // a Buffered sender its user saw complete
	inRing     bool          // a sender with early pieces awaiting its CTS
	ctsSent    bool          // a Stream receiver granted ahead (see grantAhead)

	pkt        []byte // outgoing control packet, allocated on first use
	pktLen     int
	pktPending bool

	// A released transfer goes back to the Engine's pool once it has
	// also left the live list and the outbox.
	inLive   bool
	released bool
}

// Segment is one piece of a buffer in another process.
type Segment struct {
	Addr uint64
	Len  uint64
}

func (t *Transfer) setSlot(s *backendSlot) {
	t.s = s
	if s != nil {
		t.stats.Backend = s.name
	}
}

// Peer returns the rank at the other end.
func (t *Transfer) Peer() int { return t.peer }

// Side tells whether this process sends or receives.
func (t *Transfer) Side() Side { return t.side }

// Len returns the number of bytes the transfer moves.
func (t *Transfer) Len() int64 { return t.length }

// MessageLen returns the sender's message length (above Len when truncated).
func (t *Transfer) MessageLen() int64 { return t.msgLen }

// Moved returns how many bytes this side has moved so far.
func (t *Transfer) Moved() int64 { return t.moved }

// Buffers returns the transfer's iovec list.
func (t *Transfer) Buffers() [][]byte { return t.iov }

// Done reports whether the transfer has completed on this side. A sender
// on a [Buffered] backend is done once its bytes are in the channel.
func (t *Transfer) Done() bool { return t.state == stDone || t.handedBack }

// Err returns the completion error (nil while in flight or on success).
func (t *Transfer) Err() error { return t.err }

// Stats returns the transfer's statistics.
func (t *Transfer) Stats() Stats { return t.stats }

// Backend returns the name of the backend carrying the transfer.
func (t *Transfer) Backend() string { return t.stats.Backend }

// CountSyscalls adds n system calls to the transfer's statistics.
func (t *Transfer) CountSyscalls(n int) { t.stats.Syscalls += n }

// Remote returns the peer's buffer as set by SetRemote.
func (t *Transfer) Remote() []Segment { return t.remote }

// SetRemote records the peer's buffer (from its handle), reusing storage.
func (t *Transfer) SetRemote(segs []Segment) { t.remote = append(t.remote[:0], segs...) }

// CheckPeer returns a *PeerError if the peer process has exited, so that a
// backend can tell an end-of-file from a peer that has not started yet.
func (t *Transfer) CheckPeer() error { return t.e.peerAlive(t.peer) }

func (t *Transfer) packet() []byte {
	if t.pkt == nil {
		t.pkt = make([]byte, hdrLen+segHandleLen(t.e.cfg.MaxSegments)+256)
	}
	return t.pkt
}

// Iovecs fills dst from the cursor with at most max bytes (and no more
// than remain) and returns the filled part and its byte count. Zero-length
// buffers are skipped.
func (t *Transfer) Iovecs(dst []unix.Iovec, max int) ([]unix.Iovec, int) {
	max = int(min(int64(max), t.length-t.moved))
	n, k := 0, 0
	for seg, off := t.seg, t.off; seg < len(t.iov) && n < max && k < len(dst); seg++ {
		b := t.iov[seg][off:]
		off = 0
		if len(b) == 0 {
			continue
		}
		if len(b) > max-n {
			b = b[:max-n]
		}
		dst[k] = unix.Iovec{Base: &b[0]}
		dst[k].SetLen(len(b))
		n += len(b)
		k++
	}
	return dst[:k], n
}

// RemoteIovecs is Iovecs for the peer's buffer set with SetRemote.
func (t *Transfer) RemoteIovecs(dst []unix.RemoteIovec, max int) ([]unix.RemoteIovec, int) {
	max = int(min(int64(max), t.length-t.moved))
	n, k := 0, 0
	for seg, off := t.rseg, t.roff; seg < len(t.remote) && n < max && k < len(dst); seg++ {
		s := t.remote[seg]
		l := s.Len - off
		if l == 0 {
			off = 0
			continue
		}
		if l > uint64(max-n) {
			l = uint64(max - n)
		}
		dst[k] = unix.RemoteIovec{Base: uintptr(s.Addr + off), Len: int(l)}
		off = 0
		n += int(l)
		k++
	}
	return dst[:k], n
}

// Gather copies up to len(dst) of the bytes at the cursor into dst, through
// memcopy.Copy, without moving the cursor.
func (t *Transfer) Gather(dst []byte) int { return t.walk(dst, 0, true) }

// Scatter copies up to len(src) bytes from src into the buffers at the
// cursor, through memcopy.Copy, without moving the cursor.
func (t *Transfer) Scatter(src []byte) int { return t.walk(src, 0, false) }

func (t *Transfer) gatherAt(dst []byte, skip int) int  { return t.walk(dst, skip, true) }
func (t *Transfer) scatterAt(src []byte, skip int) int { return t.walk(src, skip, false) }

// walk copies between p and the buffers, starting skip bytes past the
// cursor, never past the transfer's length.
func (t *Transfer) walk(p []byte, skip int, out bool) int {
	max := int(min(int64(len(p)), t.length-t.moved-int64(skip)))
	n := 0
	for seg, off := t.seg, t.off; seg < len(t.iov) && n < max; seg++ {
		b := t.iov[seg][off:]
		off = 0
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		b = b[skip:]
		skip = 0
		if len(b) > max-n {
			b = b[:max-n]
		}
		if out {
			n += memcopy.Copy(p[n:max], b)
		} else {
			n += memcopy.Copy(b, p[n:max])
		}
	}
	return n
}

// end is where this side's copying stops: the transfer's length, or for
// the receiver of a Split transfer, the split point.
func (t *Transfer) end() int64 {
	if t.side == Receiver && t.s != nil && t.s.flow == Split {
		return SplitPoint(t.length)
	}
	return t.length
}

// skip moves the cursors to byte n without counting the bytes as moved by
// this side's backend: a Split sender starts at the split point.
func (t *Transfer) skip(n int64) { t.move(int(n - t.moved)) }

// rewind puts the cursors back to the start: the receiver discarded what
// the sender moved before the CTS.
func (t *Transfer) rewind() {
	t.moved, t.seg, t.off, t.rseg, t.roff = 0, 0, 0, 0, 0
}

// advance moves both cursors by the n bytes a Step moved.
func (t *Transfer) advance(n int) {
	t.stats.Chunks++
	t.move(n)
}

// move moves both cursors by n bytes.
func (t *Transfer) move(n int) {
	t.moved += int64(n)
	left := n
	for left > 0 && t.seg < len(t.iov) {
		r := len(t.iov[t.seg]) - t.off
		if r > left {
			t.off += left
			left = 0
			break
		}
		left -= r
		t.seg++
		t.off = 0
	}
	left64 := uint64(n)
	for left64 > 0 && t.rseg < len(t.remote) {
		r := t.remote[t.rseg].Len - t.roff
		if r > left64 {
			t.roff += left64
			break
		}
		left64 -= r
		t.rseg++
		t.roff = 0
	}
}

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

// Wire format of a control packet: a 32-byte header, then a payload (the
// backend handle in RTS and CTS, the error text in a failed DONE).
//
//	0 type  1 backend id  2 status  3 zero  4..8 payload length
//	8..16 the packet sender's transfer id (a successful DONE: the
//	      nanoseconds the move took on the side sending it, at least 1,
//	      or 0 when not timed, as by the sender of a Split transfer)
//	16..24 the packet receiver's transfer id
//	24..32 length (RTS: message; CTS: bytes accepted; DONE: bytes moved)
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

// parseHeader fills h from p and returns p's payload. It writes h in place
// rather than returning it: a returned header is built from byte stores and
// copied out with 16-byte loads, which the store buffer cannot forward, and
// the stall cost some 50 ns on every packet of the receiver's path.
func parseHeader(p []byte, h *header) ([]byte, error) {
	if len(p) < hdrLen {
		return nil, fmt.Errorf("lmt: control packet of %d bytes, shorter than the %d-byte header", len(p), hdrLen)
	}
	le := binary.LittleEndian
	h.typ, h.kind, h.status = pktType(p[0]), p[1], p[2]
	h.src, h.dst, h.length = le.Uint64(p[8:]), le.Uint64(p[16:]), int64(le.Uint64(p[24:]))
	n := int(le.Uint32(p[4:]))
	if h.typ < pktRTS || h.typ > pktDone || p[3] != 0 || n > len(p)-hdrLen || h.length < 0 {
		return nil, fmt.Errorf("lmt: malformed control packet (type %d, payload %d of %d bytes)", p[0], n, len(p)-hdrLen)
	}
	return p[hdrLen : hdrLen+n], nil
}

// IsRTS reports whether pkt is an RTS written by StartSend (for control
// channels that carry RTS and other packets alike).
func IsRTS(pkt []byte) bool { return len(pkt) >= hdrLen && pktType(pkt[0]) == pktRTS }
