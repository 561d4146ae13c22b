package lmt

import (
	"time"

	"github.com/knemesis/knemesis/internal/memcopy"
	"golang.org/x/sys/unix"
)

// Transfer is one large message on one side. Backends read and move its
// cursor through the methods below; users read Done, Err and Stats.
//
// Its protocol state is its state word and its channel: whether a stream
// sender may fill early, has early pieces in the channel, or is pushing
// is said by its channel's fields and its state (see channel), not by
// flags of its own. What one flow alone needs sits in a field named for it.
type Transfer struct {
	// User is free for the caller (the Nemesis adapter hangs its request
	// here).
	User any

	e      *Engine
	ch     *channel // the backend and peer carrying it; nil if none is known
	flow   flow     // ch's flow, decided once per backend
	id     uint64   // ours
	peerID uint64   // the peer Engine's id for the same transfer
	peer   int
	side   Side
	state  tstate
	err    error
	// failedFrom is the state a stFailing transfer failed in.
	failedFrom tstate

	iov    [][]byte
	msgLen int64 // the sender's length
	length int64 // what this transfer moves: min(msgLen, receive capacity)
	moved  int64
	seg    int // cursor: iov[seg][off:] is next
	off    int

	remote []Segment // the peer's buffer, for one-sided backends
	rseg   int
	roff   uint64

	dt typed // datatype descriptions, instead of iov or remote

	stats     Stats
	started   time.Duration // monotonic(), at StartSend or StartRecv
	moveStart time.Duration // when the payload could start moving

	grantedIn uint64 // stream receiver: Engine.pass in which leaveReceiver granted it
	split     halves // split flow only
	copied    []byte // pull flow, a Copier's sender: its copy (SetCopy)

	pkt        []byte // outgoing control packet, allocated on first use
	pktLen     int
	pktPending bool // in the outbox

	// A released transfer goes back to the Engine's pool once it has
	// also left the live list and the outbox.
	inLive   bool
	released bool
}

// tstate is where a transfer stands on its side.
type tstate uint8

const (
	stWaitCTS tstate = iota + 1 // a sender waiting for the receiver's CTS
	// stQueued: a stream receiver waiting for its channel, or a stream
	// sender past its CTS waiting for its turn to push (see channel).
	stQueued
	stActive   // Progress Steps it
	stWaitDone // this side's part is done; the peer's DONE completes it
	stDone
	// stFailing: failed (t.err) while its backend may still write into
	// its buffers ([Quiescer]); not Done, kept in the live list until
	// Progress finds the backend quiet and completes it from failedFrom.
	stFailing
	// stHanded: a sender on a Buffered channel with every byte in the
	// channel, or of a Copier with the message in its copy, complete
	// for its user, waiting for the receiver's DONE.
	stHanded
	// stCopied: a sender of a Copier backend filling its copy of the
	// message (Copier.Fill); once it is full, Progress hands it back to
	// its user (stHanded), never StartSend, whose caller has yet to send
	// the RTS.
	stCopied
)

// Segment is one piece of a buffer in another process.
type Segment struct {
	Addr uint64
	Len  uint64
}

// setChannel puts t on ch (nil when the RTS named a backend unknown here),
// staging a typed side's small blocks as that backend wants them.
func (t *Transfer) setChannel(ch *channel) {
	t.ch = ch
	if ch != nil {
		t.flow = ch.slot.flow
		t.stats.Backend = ch.slot.name
		if t.dt.local != nil {
			t.stage(ch.slot)
		}
	}
}

// ID returns the transfer's id, which this Engine's packets carry.
func (t *Transfer) ID() uint64 { return t.id }

// PeerID returns the peer Engine's id for the same transfer.
func (t *Transfer) PeerID() uint64 { return t.peerID }

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

// SetCopy names b as the memory a [Copier] sender copies the message
// into, at least the message's length.
func (t *Transfer) SetCopy(b []byte) { t.copied = b }

// Copy returns the memory SetCopy named, nil if none.
func (t *Transfer) Copy() []byte { return t.copied }

// useCopy makes the filled copy the transfer's only buffer: the caller's
// buffers are free from then on, and whatever still reads the message (a
// DONE's length, a failure's report) reads the copy.
func (t *Transfer) useCopy() {
	t.iov = append(t.iov[:0], t.copied[:t.length])
	t.seg, t.off = 0, 0
}

// Done reports whether the transfer has completed on this side. A sender
// on a [Buffered] backend is done once its bytes are in the channel.
func (t *Transfer) Done() bool { return t.state == stDone || t.state == stHanded }

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
	if t.dt.local != nil {
		return t.typedIovecs(dst, int64(max))
	}
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
	if t.dt.hasRemote {
		return t.typedRemoteIovecs(dst, int64(max))
	}
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

// GatherAt is Gather starting skip bytes past the cursor.
func (t *Transfer) GatherAt(dst []byte, skip int) int { return t.walk(dst, skip, true) }

// ScatterAt is Scatter starting skip bytes past the cursor.
func (t *Transfer) ScatterAt(src []byte, skip int) int { return t.walk(src, skip, false) }

// walk copies between p and the buffers, starting skip bytes past the
// cursor, never past the transfer's length.
func (t *Transfer) walk(p []byte, skip int, out bool) int {
	n := int(min(int64(len(p)), t.length-t.moved-int64(skip)))
	if n <= 0 {
		return 0
	}
	if t.dt.local != nil {
		return t.typedWalk(p[:n], t.moved+int64(skip), out)
	}
	return walkIov(t.iov, t.seg, t.off, p[:n], skip, out)
}

// walkIov copies between p and the buffers iov from iov[seg][off:] on,
// skip bytes past there, as much as p holds and they have.
func walkIov(iov [][]byte, seg, off int, p []byte, skip int, out bool) int {
	n := 0
	for ; seg < len(iov) && n < len(p); seg++ {
		b := iov[seg][off:]
		off = 0
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		b = b[skip:]
		skip = 0
		if out {
			n += memcopy.Copy(p[n:], b)
		} else {
			n += memcopy.Copy(b, p[n:])
		}
	}
	return n
}

// advanceIov moves the cursor iov[*seg][*off:] n bytes on.
func advanceIov(iov [][]byte, seg, off *int, n int) {
	for n > 0 && *seg < len(iov) {
		r := len(iov[*seg]) - *off
		if r > n {
			*off += n
			return
		}
		n -= r
		*seg++
		*off = 0
	}
}

// skip moves the cursors to byte n without counting the bytes as moved by
// this side's backend: a Split sender starts at the cut.
func (t *Transfer) skip(n int64) { t.move(int(n - t.moved)) }

// rewind puts the cursors back to the start: the receiver discarded what
// the sender moved before the CTS.
func (t *Transfer) rewind() {
	t.moved, t.seg, t.off, t.rseg, t.roff = 0, 0, 0, 0, 0
	t.moveTyped()
}

// advance moves both cursors by the n bytes a Step moved.
func (t *Transfer) advance(n int) {
	t.stats.Chunks++
	t.move(n)
}

// move moves both cursors by n bytes.
func (t *Transfer) move(n int) {
	t.moved += int64(n)
	if t.dt.local != nil || t.dt.hasRemote {
		t.moveTyped()
	}
	advanceIov(t.iov, &t.seg, &t.off, n)
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
