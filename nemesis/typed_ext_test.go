package nemesis_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// guard fills every byte of a receiver's buffers that no message may
// touch: the gaps between blocks and entries, and the bytes around them.
const guard = 0xEE

// side is how one side of a typed exchange holds the message.
type side uint8

const (
	asType side = iota
	asBuffer
	asList
)

func (s side) String() string { return [...]string{"type", "buffer", "list"}[s] }

// typedShape is one exchange: each side's holding, a receive posted after
// the message (or its RTS) arrived, and a receiver holding short bytes
// fewer than the message.
type typedShape struct {
	send, recv side
	late       bool
	short      int
}

func (s typedShape) String() string {
	str := fmt.Sprintf("%v→%v", s.send, s.recv)
	if s.late {
		str += ", late"
	}
	if s.short > 0 {
		str += fmt.Sprintf(", %d short", s.short)
	}
	return str
}

var typedShapes = []typedShape{
	{send: asType, recv: asType},
	{send: asType, recv: asType, late: true},
	{send: asType, recv: asBuffer},
	{send: asBuffer, recv: asType},
	{send: asType, recv: asList, late: true},
	{send: asList, recv: asType},
	{send: asType, recv: asType, short: 4101},
	{send: asBuffer, recv: asType, short: 1, late: true},
}

// randType describes exactly size bytes with random blocks: a vector
// when a random block length divides size, else an indexed type mixing
// short blocks and long ones (up to 64 KiB), none shorter than minBlock
// but the last. Every block has at least one byte of gap before it, and
// the base buffer one byte past the last.
func randType(rng *rand.Rand, size, minBlock int) (*datatype.Type, []byte) {
	if bl := 1 + rng.IntN(64); size > 0 && size%bl == 0 && rng.IntN(2) == 0 {
		typ, err := datatype.Vector(int64(size/bl), int64(bl), int64(bl+1+rng.IntN(16)))
		if err != nil {
			panic(err)
		}
		return typ, make([]byte, typ.Extent()+1)
	}
	var lens, disps []int64
	end := int64(0)
	for left := size; left > 0; {
		n := 1 + rng.IntN(100)
		if rng.IntN(8) == 0 {
			n = 4096 + rng.IntN(64<<10)
		}
		n = min(max(n, minBlock), left)
		d := end + 1 + int64(rng.IntN(24))
		lens, disps = append(lens, int64(n)), append(disps, d)
		end, left = d+int64(n), left-n
	}
	typ, err := datatype.Indexed(lens, disps)
	if err != nil {
		panic(err)
	}
	return typ, make([]byte, typ.Extent()+1)
}

// holding is one side's buffers for a message of n bytes.
type holding struct {
	side side
	typ  *datatype.Type
	base []byte   // the type's base, the buffer, or the list's backing
	iov  [][]byte // list entries, one byte of gap between them
}

func newHolding(rng *rand.Rand, s side, n, minBlock int) holding {
	switch s {
	case asType:
		typ, base := randType(rng, n, minBlock)
		return holding{side: s, typ: typ, base: base}
	case asBuffer:
		return holding{side: s, base: make([]byte, n)}
	}
	h := holding{side: s, base: make([]byte, n+n/7+2)}
	at := 1
	for left := n; left > 0; {
		k := min(1+rng.IntN(5000), left)
		h.iov = append(h.iov, h.base[at:at+k])
		at, left = at+k+1, left-k
	}
	return h
}

// packed is what h holds of a message, in order: Pack for a type.
func (h holding) packed() []byte {
	switch h.side {
	case asType:
		out := make([]byte, h.typ.Size())
		if _, err := h.typ.Pack(out, h.base); err != nil {
			panic(err)
		}
		return out
	case asList:
		return bytes.Join(h.iov, []byte{})
	}
	return h.base
}

// expect is the receiver's base after count bytes of msg came in: guard
// everywhere but the first count bytes of the blocks or entries.
func (h holding) expect(msg []byte) []byte {
	want := bytes.Repeat([]byte{guard}, len(h.base))
	switch h.side {
	case asType:
		c := h.typ.Cursor()
		if _, err := c.Unpack(want, msg); err != nil {
			panic(err)
		}
	case asList:
		for _, e := range h.iov {
			at := cap(h.base) - cap(e)
			msg = msg[copy(want[at:at+len(e)], msg):]
		}
	default:
		copy(want, msg)
	}
	return want
}

// smallBytes is the bytes of h's blocks shorter than a page: what the LMT
// stages for a typed side (lmt.Config.SmallBlock's default).
func (h holding) smallBytes() int64 {
	if h.typ == nil {
		return 0
	}
	var n int64
	for i := range h.typ.Blocks() {
		if _, l := h.typ.Block(i); l < datatype.DefaultSmallBlock {
			n += l
		}
	}
	return n
}

// typedExchange moves one message of n bytes with tag from rank 0 to
// rank 1, shaped as s, and checks on rank 1 every byte of its buffers
// (content by CRC against the reference pack, guards byte by byte), the
// status and the exact error. Both ranks build both sides from seed.
// viaLMT says whether the message goes by rendezvous; then each typed
// side's Stats.Staged must be its small blocks' bytes exactly.
func typedExchange(ep *nemesis.Endpoint, n, tag int, s typedShape, seed uint64, viaLMT bool) error {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	snd := newHolding(rng, s.send, n, 1)
	for i := range snd.base {
		snd.base[i] = byte(rng.Uint32())
	}
	room := max(n-s.short, 0)
	minBlock := 1
	if viaLMT && s.send != asType {
		// The sender's backend (shm) walks a description without
		// staging: the receiver moves to cma-write, in place, when its
		// CTS holds the description, so that the side stages its small
		// blocks (bufferToLongDescription has a longer one).
		minBlock = room / 100
	}
	rcv := newHolding(rng, s.recv, room, minBlock)
	msg := snd.packed()
	var r nemesis.Request
	if ep.Rank() == 0 {
		if !s.late {
			if _, err := ep.Recv(1, nemesis.MaxTag, nil); err != nil {
				return err
			}
		}
		var err error
		switch s.send {
		case asType:
			err = ep.IsendType(&r, 1, tag, snd.base, snd.typ)
		case asList:
			err = ep.Isendv(&r, 1, tag, snd.iov)
		default:
			err = ep.Isend(&r, 1, tag, snd.base)
		}
		if err == nil {
			err = ep.Wait(&r)
		}
		if err != nil {
			return fmt.Errorf("%d bytes, %v: send: %w", n, s, err)
		}
		return checkVia(&r, viaLMT, snd.smallBytes(), n, s)
	}
	for i := range rcv.base {
		rcv.base[i] = guard
	}
	post := func() error {
		switch s.recv {
		case asType:
			return ep.IrecvType(&r, 0, tag, rcv.base, rcv.typ)
		case asList:
			return ep.Irecvv(&r, 0, tag, rcv.iov)
		}
		return ep.Irecv(&r, 0, tag, rcv.base)
	}
	if s.late {
		if st, err := ep.Probe(0, tag); err != nil || st.Len != n {
			return fmt.Errorf("%d bytes, %v: probe %+v, %v", n, s, st, err)
		}
	}
	if err := post(); err != nil {
		return err
	}
	if !s.late {
		if err := ep.Send(0, nemesis.MaxTag, nil); err != nil {
			return err
		}
	}
	err := ep.Wait(&r)
	if n > room {
		want := fmt.Sprintf("%v: message of %d bytes, receive buffer of %d", nemesis.ErrTruncated, n, room)
		if !errors.Is(err, nemesis.ErrTruncated) || err.Error() != want {
			return fmt.Errorf("%d bytes, %v: error %v, want %q", n, s, err, want)
		}
	} else if err != nil {
		return fmt.Errorf("%d bytes, %v: %w", n, s, err)
	}
	if st := r.Status(); st != (nemesis.Status{Source: 0, Tag: tag, Len: n, Count: room}) {
		return fmt.Errorf("%d bytes, %v: status %+v, want %d of %d bytes", n, s, st, room, n)
	}
	if got, want := crc32.ChecksumIEEE(rcv.packed()), crc32.ChecksumIEEE(msg[:room]); got != want {
		return fmt.Errorf("%d bytes, %v: received CRC %#x, the sender's reference pack %#x", n, s, got, want)
	}
	if want := rcv.expect(msg[:room]); !bytes.Equal(rcv.base, want) {
		i := 0
		for rcv.base[i] == want[i] {
			i++
		}
		return fmt.Errorf("%d bytes, %v: byte %d of the receive buffers is %#x, want %#x (guard %#x)", n, s, i, rcv.base[i], want[i], guard)
	}
	staged := rcv.smallBytes()
	if n > room {
		staged = -1 // a truncated receive scatters what it took
	}
	return checkVia(&r, viaLMT, staged, n, s)
}

// checkVia checks that r went by the LMT exactly when viaLMT says, and
// then that the side staged staged bytes (unless negative).
func checkVia(r *nemesis.Request, viaLMT bool, staged int64, n int, s typedShape) error {
	if r.ViaLMT() != viaLMT {
		return fmt.Errorf("%d bytes, %v: rank's request went by the LMT: %v, want %v", n, s, r.ViaLMT(), viaLMT)
	}
	if !viaLMT || staged < 0 {
		return nil
	}
	st, ok := attach.Stats(r)
	if !ok || st.Staged != staged {
		return fmt.Errorf("%d bytes, %v: LMT stats %+v (%v): staged %d bytes, want %d", n, s, st, ok, st.Staged, staged)
	}
	return nil
}

// TestTypedEager: types on either or both sides against buffers and
// lists, through the fastbox, one cell and many cells (no LMT: every
// size is eager), posted first and late, and truncated, between two
// processes.
func TestTypedEager(t *testing.T) {
	typedJob(t, false, func(ep *nemesis.Endpoint) error {
		fb, cell := ep.FastboxPayload(), ep.CellPayload()
		if err := typedSizes(ep, []int{0, 1, fb, fb + 1, cell + 1, 3*cell + 5, 100 << 10}, math.MaxInt); err != nil {
			return err
		}
		if st := ep.Stats(); ep.Rank() == 0 && (st.FastboxMsgs == 0 || st.QueueMsgs == 0 || st.RTS != 0) {
			return fmt.Errorf("stats %+v: want messages through the fastbox and the queue, none by rendezvous", st)
		}
		return nil
	})
}

// TestTypedLMT: with attach's LMT, eager sizes stay in the cells and
// longer ones go by rendezvous as descriptions (lmt.Engine's
// StartSendType, StartRecvType), each typed side staging exactly its
// blocks under a page; the paper's shape of 64-byte and 256 KiB blocks
// stages only the 64-byte ones; a description too long for an RTS goes
// by the cells; a buffer sent by rendezvous to a description too long for
// a CTS arrives through shm.
func TestTypedLMT(t *testing.T) {
	typedJob(t, true, func(ep *nemesis.Endpoint) error {
		sizes := []int{100, 20 << 10, attach.DefaultEagerMax + 1, 300<<10 + 7, 2<<20 + 3}
		if err := typedSizes(ep, sizes, attach.DefaultEagerMax); err != nil {
			return err
		}
		if err := paperShape(ep, 1<<20); err != nil {
			return err
		}
		if err := tooManyBlocksForRTS(ep, 1<<20+1); err != nil {
			return err
		}
		if err := longDescriptionToBuffer(ep, 1<<20+3); err != nil {
			return err
		}
		return bufferToLongDescription(ep, 1<<20+2)
	})
}

// typedJob runs body in both ranks of a two-process job, their endpoints
// with attach's LMT when withLMT, and keeps either rank from leaving
// before the other is done.
func typedJob(t *testing.T, withLMT bool, body func(*nemesis.Endpoint) error) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		if withLMT {
			l, err := attach.Attach(ep, attach.Options{})
			if err != nil {
				return err
			}
			defer l.Close()
		}
		if err := body(ep); err != nil {
			return err
		}
		if err := ep.Send(1-p.Rank, nemesis.MaxTag-1, nil); err != nil {
			return err
		}
		_, err = ep.Recv(1-p.Rank, nemesis.MaxTag-1, nil)
		return err
	})
}

// typedSizes runs every shape at every size, the messages of more than
// eagerMax bytes by rendezvous.
func typedSizes(ep *nemesis.Endpoint, sizes []int, eagerMax int) error {
	tag := 0
	for _, n := range sizes {
		for _, s := range typedShapes {
			if err := typedExchange(ep, n, tag, s, uint64(tag), n > eagerMax); err != nil {
				return err
			}
			tag++
		}
	}
	return nil
}

// paperShape sends the indexed type of Aumage et al. (CAC 2007, §5.3),
// blocks alternating 64 bytes and 256 KiB (8 of them here), type to type:
// each side stages its four 64-byte blocks and nothing else.
func paperShape(ep *nemesis.Endpoint, tag int) error {
	var lens, disps []int64
	var end int64
	for i := range 8 {
		n := int64(64)
		if i%2 == 1 {
			n = 256 << 10
		}
		lens, disps = append(lens, n), append(disps, end+8)
		end += 8 + n
	}
	r, err := indexedAcross(ep, tag, lens, disps)
	if err != nil {
		return fmt.Errorf("paper shape: %w", err)
	}
	if st, ok := attach.Stats(r); !ok || st.Staged != 4*64 {
		return fmt.Errorf("paper shape, rank %d: stats %+v (%v), want 256 bytes staged", ep.Rank(), st, ok)
	}
	return nil
}

// tooManyBlocksForRTS sends an indexed type of 6,000 blocks (72 KB,
// over the eager limit) whose encoding does not fit an RTS: the cells
// carry it, to a typed receive, where a rendezvous would fail.
func tooManyBlocksForRTS(ep *nemesis.Endpoint, tag int) error {
	lens, disps := manyBlocks()
	r, err := indexedAcross(ep, tag, lens, disps)
	switch {
	case err != nil:
		return fmt.Errorf("6000 blocks: %w", err)
	case r.ViaLMT():
		return fmt.Errorf("6000 blocks, rank %d: went by the LMT, want the cells", ep.Rank())
	}
	return nil
}

// manyBlocks describes 6,000 blocks of 12 bytes, 72,000 bytes over the
// eager limit, whose encoding (about 12 KB) fits neither an RTS nor a CTS.
func manyBlocks() (lens, disps []int64) {
	lens, disps = make([]int64, 6000), make([]int64, 6000)
	for i := range lens {
		lens[i], disps[i] = 12, int64(i)*16+int64(i%3)
	}
	return lens, disps
}

// bufferToLongDescription sends 72,000 bytes from one buffer, by
// rendezvous, to a typed receive of 6,000 blocks whose description no
// CTS holds: the sender's backend (shm) walks the receiver's blocks
// itself, so the receiver stays on it instead of falling back to
// cma-write. Both sides succeed, the blocks hold the message (CRC against
// the reference unpack), every byte between them its guard, and neither
// side stages a block.
func bufferToLongDescription(ep *nemesis.Endpoint, tag int) error {
	typ, err := datatype.Indexed(manyBlocks())
	if err != nil {
		return err
	}
	msg := make([]byte, typ.Size())
	for i := range msg {
		msg[i] = byte(i*5 + 1)
	}
	var r nemesis.Request
	if ep.Rank() == 0 {
		err = ep.Isend(&r, 1, tag, msg)
		if err == nil {
			err = ep.Wait(&r)
		}
	} else {
		base := bytes.Repeat([]byte{guard}, int(typ.Extent())+1)
		err = ep.IrecvType(&r, 0, tag, base, typ)
		if err == nil {
			err = ep.Wait(&r)
		}
		want := bytes.Repeat([]byte{guard}, len(base))
		c := typ.Cursor()
		c.Unpack(want, msg)
		got := make([]byte, typ.Size())
		typ.Pack(got, base)
		switch {
		case err != nil:
		case crc32.ChecksumIEEE(got) != crc32.ChecksumIEEE(msg):
			err = fmt.Errorf("received CRC %#x, the message's %#x", crc32.ChecksumIEEE(got), crc32.ChecksumIEEE(msg))
		case !bytes.Equal(base, want):
			err = errors.New("a byte between the blocks was written")
		}
	}
	if err != nil {
		return fmt.Errorf("buffer to 6000 blocks, rank %d: %w", ep.Rank(), err)
	}
	if st, ok := attach.Stats(&r); !r.ViaLMT() || !ok || st.Backend != "shm" || st.Staged != 0 || st.Bytes != typ.Size() {
		return fmt.Errorf("buffer to 6000 blocks, rank %d: via the LMT %v, stats %+v (%v); want shm, %d bytes, none staged", ep.Rank(), r.ViaLMT(), st, ok, typ.Size())
	}
	return nil
}

// longDescriptionToBuffer sends the 6,000 blocks of manyBlocks, whose
// description no RTS holds, to a receive into one buffer: the cells
// carry it (see rtsHolds), and the buffer holds the blocks' packed
// stream, nothing past it.
func longDescriptionToBuffer(ep *nemesis.Endpoint, tag int) error {
	typ, err := datatype.Indexed(manyBlocks())
	if err != nil {
		return err
	}
	base := make([]byte, typ.Extent())
	for i := range base {
		base[i] = byte(i * 3)
	}
	msg := make([]byte, typ.Size())
	typ.Pack(msg, base)
	var r nemesis.Request
	buf := bytes.Repeat([]byte{guard}, len(msg)+64)
	if ep.Rank() == 0 {
		err = ep.IsendType(&r, 1, tag, base, typ)
	} else {
		err = ep.Irecv(&r, 0, tag, buf[:len(msg)])
	}
	if err == nil {
		err = ep.Wait(&r)
	}
	switch {
	case err != nil:
		return fmt.Errorf("6000 blocks to a buffer, rank %d: %w", ep.Rank(), err)
	case r.ViaLMT():
		return fmt.Errorf("6000 blocks to a buffer, rank %d: went by the LMT, want the cells", ep.Rank())
	case ep.Rank() == 1 && (!bytes.Equal(buf[:len(msg)], msg) || !bytes.Equal(buf[len(msg):], bytes.Repeat([]byte{guard}, 64))):
		return fmt.Errorf("6000 blocks to a buffer: the buffer differs from the reference pack")
	}
	return nil
}

// indexedAcross sends the indexed type of lens and disps from rank 0's
// base, byte i holding byte(i*7), to the same type over rank 1's zeroed
// base, and has rank 1 check every byte of it: the blocks hold what was
// sent, the gaps are still zero. It returns each rank's request.
func indexedAcross(ep *nemesis.Endpoint, tag int, lens, disps []int64) (*nemesis.Request, error) {
	typ, err := datatype.Indexed(lens, disps)
	if err != nil {
		return nil, err
	}
	base := make([]byte, typ.Extent())
	r := new(nemesis.Request)
	if ep.Rank() == 0 {
		for i := range base {
			base[i] = byte(i * 7)
		}
		err = ep.IsendType(r, 1, tag, base, typ)
	} else {
		err = ep.IrecvType(r, 0, tag, base, typ)
	}
	if err == nil {
		err = ep.Wait(r)
	}
	if err != nil || ep.Rank() == 0 {
		return r, err
	}
	if st := r.Status(); st.Count != int(typ.Size()) || st.Len != int(typ.Size()) {
		return r, fmt.Errorf("status %+v, want %d bytes", st, typ.Size())
	}
	b := 0
	for i := range base {
		for b < len(lens) && int64(i) >= disps[b]+lens[b] {
			b++
		}
		in := b < len(lens) && int64(i) >= disps[b]
		if want := byte(i * 7); in && base[i] != want || !in && base[i] != 0 {
			return r, fmt.Errorf("byte %d is %#x (in a block: %v)", i, base[i], in)
		}
	}
	return r, nil
}
