// Package netread is the LMT backend of ranks on other nodes: the
// receiver reads the sender's buffer with the network module's one-sided
// read (libfabric's fi_read of a registered region), so that one
// rendezvous, the LMT's, carries long messages within a node and between
// nodes (Buntinas, Mercier, Gropp, "Design and Evaluation of Nemesis",
// CCGRID 2006, §3.5: RTS, payload by the fastest one-sided means, DONE).
//
// It is a Pull backend (lmt.NetRead):
//
//	sender                              receiver
//	Handle: ExposeNet each segment,
//	its length and key into the RTS ──▶ SetPeerHandle: lengths and keys
//	                                    Step: ReadNet each region into the
//	                                    receive buffers; the whole length
//	                                    once the module reported every read
//	                         ◀── DONE (the engine's)
//	Release: UnexposeNet each region
//
// The engine gives it the remote ranks and nothing else (lmt.Config.Remote,
// Identity.Remote), and its Net is the nemesis endpoint (its Settings, in
// lmt.Config.Backends), which polls the module while reads are in flight and
// carries the RTS and DONE through it. It imports no cgo: the module
// behind the endpoint may be libfabric's (netmod/ofinet) or any
// nemesis.NetReader.
//
// A receive that fails while its reads are in flight (its sender lost,
// a read failed, the engine closed) does not complete for its user until
// the module has reported every one of them, done or cancelled
// (lmt.Quiescer): until then a read may still write into its buffer.
// A provider cancels the reads of a lost peer (tcp;ofi_rxm: FI_ECANCELED),
// so the wait ends.
//
// The RTS names one region per non-empty segment of the send, each up to
// 9 + nemesis.NetHandleMax bytes: a send of more segments than the RTS
// has room for fails, naming both. The backend takes no datatype
// description. State per transfer is pooled: a steady stream of long
// messages registers and reads without allocating.
package netread

import (
	"encoding/binary"
	"fmt"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
)

// Net is what the backend moves bytes through: *nemesis.Endpoint.
type Net interface {
	NetReads(rank int) bool
	ExposeNet(dst int, buf, h []byte) (int, int32, error)
	UnexposeNet(slot int32)
	ReadNet(rd *nemesis.NetRead, src int, h []byte, dst [][]byte) (bool, error)
}

func init() { lmt.Register(lmt.NetRead, newBackend, nil) }

// Settings are the backend's own (an lmt.Settings, in lmt.Config.Backends):
// what it moves bytes through. A job with ranks on other nodes gives it
// its endpoint; without, the backend reaches no rank.
type Settings struct {
	Net Net
}

// Validate implements lmt.Settings: any Net will do, and none.
func (Settings) Validate() error { return nil }

type backend struct {
	net   Net
	xfers []*xfer // by index + 1 in the transfer's Remote()[0].Addr
	free  []int32
	mark  [1]lmt.Segment
	dst   [][]byte // the entries of the read being started
}

// xfer is a transfer's state here.
type xfer struct {
	t     *lmt.Transfer // nil when idle
	idx   int32
	slots []int32 // sender: its regions, for UnexposeNet

	// receiver: the sender's regions, the next to read, where it starts
	// in the message, and the reads in flight.
	regions []region
	next    int
	at      int64
	rd      nemesis.NetRead
}

type region struct {
	len int64
	hn  uint8
	h   [nemesis.NetHandleMax]byte
}

// regionHdr is a region's length (8 bytes) and handle length (1) in the
// RTS; the RTS starts with the count of regions (2).
const (
	regionHdr = 9
	countLen  = 2
)

func newBackend(env *lmt.Env) (lmt.Backend, error) {
	return &backend{net: lmt.SettingsOf[Settings](env.Config).Net}, nil
}

func (b *backend) Check(peer lmt.Peer) error {
	if b.net == nil || !b.net.NetReads(peer.Rank) {
		return &lmt.Unavailable{Backend: lmt.NetRead, Peer: peer.Rank,
			Reason: "no network module that reads remote memory reaches this rank",
			Fix:    "join the job with nemesis Options.Net over a module with one-sided reads (netmod/ofinet), and give the engine its netread.Settings"}
	}
	return nil
}

// take returns idle state for t, and names it in t's Remote segment.
func (b *backend) take(t *lmt.Transfer) *xfer {
	var x *xfer
	if k := len(b.free); k > 0 {
		x = b.xfers[b.free[k-1]]
		b.free = b.free[:k-1]
	} else {
		x = &xfer{idx: int32(len(b.xfers))}
		b.xfers = append(b.xfers, x)
	}
	x.t, x.slots, x.regions, x.next, x.at, x.rd = t, x.slots[:0], x.regions[:0], 0, 0, nemesis.NetRead{}
	b.mark[0] = lmt.Segment{Addr: uint64(x.idx) + 1}
	t.SetRemote(b.mark[:])
	return x
}

// of returns t's state here, nil when it has none (a transfer put on this
// backend that failed before its handle was read).
func (b *backend) of(t *lmt.Transfer) *xfer {
	r := t.Remote()
	if len(r) != 1 || r[0].Addr == 0 || r[0].Addr > uint64(len(b.xfers)) {
		return nil
	}
	if x := b.xfers[r[0].Addr-1]; x.t == t {
		return x
	}
	return nil
}

func (b *backend) put(x *xfer) {
	x.t = nil
	b.free = append(b.free, x.idx)
}

// Handle exposes every non-empty segment of the send to its receiver and
// writes their count, lengths and keys into dst.
func (b *backend) Handle(t *lmt.Transfer, dst []byte) (int, error) {
	t.SetRemote(nil)
	if len(dst) < countLen {
		return 0, fmt.Errorf("netread: RTS room of %d bytes", len(dst))
	}
	x := b.take(t)
	n, count := countLen, 0
	for _, seg := range t.Buffers() {
		if len(seg) == 0 {
			continue
		}
		if len(dst)-n <= regionHdr {
			b.unexposeAll(x)
			return 0, fmt.Errorf("netread: a send to rank %d of more segments than its RTS has room for: the keys of %d fill its %d bytes", t.Peer(), count, len(dst))
		}
		h := dst[n+regionHdr : n+regionHdr+min(len(dst)-n-regionHdr, nemesis.NetHandleMax)]
		hn, slot, err := b.net.ExposeNet(t.Peer(), seg, h)
		if err != nil {
			b.unexposeAll(x)
			return 0, fmt.Errorf("netread: %w", err)
		}
		x.slots = append(x.slots, slot)
		binary.LittleEndian.PutUint64(dst[n:], uint64(len(seg)))
		dst[n+8] = uint8(hn)
		n += regionHdr + hn
		count++
	}
	binary.LittleEndian.PutUint16(dst, uint16(count))
	return n, nil
}

func (b *backend) unexposeAll(x *xfer) {
	for _, s := range x.slots {
		b.net.UnexposeNet(s)
	}
	x.t.SetRemote(nil)
	b.put(x)
}

// SetPeerHandle reads the sender's regions: their lengths must add up to
// the message's, and every key fit a handle.
func (b *backend) SetPeerHandle(t *lmt.Transfer, h []byte) error {
	t.SetRemote(nil)
	if len(h) < countLen {
		return lmt.Corrupt(t.Peer(), "net-read handle", "%d bytes", len(h))
	}
	count := int(binary.LittleEndian.Uint16(h))
	x := b.take(t)
	var total int64
	p := h[countLen:]
	for i := range count {
		if len(p) < regionHdr {
			return b.corrupt(x, "net-read handle", "region %d of %d cut short", i, count)
		}
		l, hn := binary.LittleEndian.Uint64(p), int(p[8])
		if hn == 0 || hn > nemesis.NetHandleMax || len(p) < regionHdr+hn || l == 0 || l > uint64(t.MessageLen()-total) {
			return b.corrupt(x, "net-read region", "%d of %d: %d bytes, a %d-byte key, %d bytes of handle left", i, count, l, hn, len(p)-regionHdr)
		}
		x.regions = append(x.regions, region{len: int64(l), hn: uint8(hn)})
		copy(x.regions[i].h[:], p[regionHdr:regionHdr+hn])
		total += int64(l)
		p = p[regionHdr+hn:]
	}
	if total != t.MessageLen() || len(p) != 0 {
		return b.corrupt(x, "net-read handle", "regions of %d bytes, %d bytes left over, for a message of %d", total, len(p), t.MessageLen())
	}
	return nil
}

func (b *backend) corrupt(x *xfer, what, format string, args ...any) error {
	err := lmt.Corrupt(x.t.Peer(), what, format, args...)
	x.t.SetRemote(nil)
	b.put(x)
	return err
}

func (b *backend) Start(t *lmt.Transfer) error { return nil }

// Step runs on the receiver: it starts the read of every region that
// holds bytes the receive takes, as the module has room, and reports the
// whole length once the module reported them all.
func (b *backend) Step(t *lmt.Transfer, max int) (int, error) {
	x := b.of(t)
	if x == nil {
		return 0, fmt.Errorf("netread: %v has no regions to read", t)
	}
	for ; x.next < len(x.regions); x.next++ {
		r := &x.regions[x.next]
		if want := min(r.len, t.Len()-x.at); want > 0 {
			b.dst = slice(b.dst[:0], t.Buffers(), x.at, want)
			ok, err := b.net.ReadNet(&x.rd, t.Peer(), r.h[:r.hn], b.dst)
			if err != nil || !ok {
				return 0, err
			}
		}
		x.at += r.len
	}
	if x.rd.Busy() {
		return 0, nil
	}
	if err := x.rd.Err(); err != nil {
		return 0, fmt.Errorf("netread: reading %d bytes from rank %d: %w", t.Len(), t.Peer(), err)
	}
	return int(t.Len() - t.Moved()), nil
}

// Abort: Release, which follows, gives back what t holds.
func (b *backend) Abort(t *lmt.Transfer) {}

// Quiet reports whether no read of t's is in flight: a receiver that
// failed while reading stays failing in the engine until the module has
// reported every read (done, failed, or cancelled with its lost sender),
// since until then the bytes of a read may still land in its buffers.
func (b *backend) Quiet(t *lmt.Transfer) bool {
	x := b.of(t)
	return x == nil || !x.rd.Busy()
}

// Release ends the sender's registrations, and frees the receiver's
// state, whose reads are all reported by now (Quiet).
func (b *backend) Release(t *lmt.Transfer) {
	x := b.of(t)
	if x == nil {
		return
	}
	t.SetRemote(nil)
	if t.Side() == lmt.Sender {
		b.unexposeAll(x)
		return
	}
	b.put(x)
}

func (b *backend) Close() error { return nil }

// slice appends to dst the entries holding bytes [off, off+n) of iov.
func slice(dst, iov [][]byte, off, n int64) [][]byte {
	for _, e := range iov {
		if n == 0 {
			break
		}
		if off >= int64(len(e)) {
			off -= int64(len(e))
			continue
		}
		k := min(int64(len(e))-off, n)
		dst = append(dst, e[off:off+k])
		off, n = 0, n-k
	}
	return dst
}

var (
	_ lmt.Backend  = (*backend)(nil)
	_ lmt.Releaser = (*backend)(nil)
	_ lmt.Quiescer = (*backend)(nil)
	_ Net          = (*nemesis.Endpoint)(nil)
)
