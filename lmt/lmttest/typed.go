package lmttest

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/pipe"
)

// Loop is a control channel between two engines of one process that
// allocates nothing: a packet is copied into a fixed slot, large enough
// for a CTS naming a description.
type Loop struct {
	Engs  [2]*lmt.Engine
	slots [2][16][4096]byte // by destination
	lens  [2][16]int
	head  [2]int
	tail  [2]int
}

type loopEnd struct {
	l *Loop
}

func (c loopEnd) Send(dst int, pkt []byte) (bool, error) {
	l := c.l
	if l.tail[dst]-l.head[dst] == len(l.slots[dst]) || len(pkt) > len(l.slots[dst][0]) {
		return false, nil
	}
	i := l.tail[dst] % len(l.slots[dst])
	l.lens[dst][i] = copy(l.slots[dst][i][:], pkt)
	l.tail[dst]++
	return true, nil
}

// NewLoop joins two engines of this process, rank 0 and 1, each preferring
// prefer, closed when t ends.
func NewLoop(t testing.TB, prefer ...string) *Loop {
	t.Helper()
	return NewLoopWith(t, func(int, *lmt.Config) {}, prefer...)
}

// NewLoopWith is NewLoop with each rank's Config changed by set.
func NewLoopWith(t testing.TB, set func(rank int, cfg *lmt.Config), prefer ...string) *Loop {
	t.Helper()
	l := &Loop{}
	job := launch.NewJobName()
	for r := range l.Engs {
		cfg := lmt.Config{Rank: r, Size: 2, Job: job, Control: loopEnd{l}, Prefer: prefer,
			PeerPID: func(int) int { return os.Getpid() }}
		set(r, &cfg)
		e, err := lmt.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		l.Engs[r] = e
		t.Cleanup(func() { e.Close() })
	}
	return l
}

// Wait delivers packets and progresses both engines until every transfer
// of ts is done.
func (l *Loop) Wait(t testing.TB, ts ...*lmt.Transfer) {
	for i := 0; ; i++ {
		done := true
		for _, tr := range ts {
			done = done && tr.Done()
		}
		if done {
			return
		}
		if i > 1e7 {
			t.Fatal("transfers never completed")
		}
		for dst, e := range l.Engs {
			for l.head[dst] < l.tail[dst] {
				i := l.head[dst] % len(l.slots[dst])
				l.head[dst]++
				if err := e.HandleControl(1-dst, l.slots[dst][i][:l.lens[dst][i]]); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Progress(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Side is how one side of a typed transfer holds its bytes: a description
// over a base buffer, or (Type nil) a plain buffer.
type Side struct {
	Type *datatype.Type
	Base []byte
}

// Start starts the transfer of s, sent from rank 0, into r, received on
// rank 1, on the engines' preferences, and returns both transfers.
func (l *Loop) Start(t testing.TB, s, r Side, rts []byte) (*lmt.Transfer, *lmt.Transfer) {
	t.Helper()
	var snd, rcv *lmt.Transfer
	var k int
	var err error
	if s.Type != nil {
		snd, k, err = l.Engs[0].StartSendType(1, s.Base, s.Type, "", rts)
	} else {
		snd, k, err = l.Engs[0].StartSend(1, [][]byte{s.Base}, "", rts)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Type != nil {
		rcv, err = l.Engs[1].StartRecvType(0, rts[:k], r.Base, r.Type)
	} else {
		rcv, err = l.Engs[1].StartRecv(0, rts[:k], [][]byte{r.Base})
	}
	if err != nil {
		t.Fatal(err)
	}
	return snd, rcv
}

// Packed is what s holds, in stream order: the reference pack of its
// description, or its buffer.
func (s Side) Packed() []byte {
	if s.Type == nil {
		return s.Base
	}
	out := make([]byte, s.Type.Size())
	if _, err := s.Type.Pack(out, s.Base); err != nil {
		panic(err)
	}
	return out
}

// Expect is what r's base must hold once msg came in, r's base having
// held fill everywhere: msg in the first blocks, fill elsewhere.
func (r Side) Expect(msg []byte, fill byte) []byte {
	want := bytes.Repeat([]byte{fill}, len(r.Base))
	if r.Type == nil {
		copy(want, msg)
		return want
	}
	c := r.Type.Cursor()
	if _, err := c.Unpack(want, msg); err != nil {
		panic(err)
	}
	return want
}

// SmallWithin is the bytes of s's blocks shorter than threshold among the
// first n bytes of its stream: what a side stages of n bytes.
func (s Side) SmallWithin(n, threshold int64) int64 {
	if s.Type == nil {
		return 0
	}
	var small int64
	for i := int64(0); i < s.Type.Blocks() && n > 0; i++ {
		_, l := s.Type.Block(i)
		if l < threshold {
			small += min(l, n)
		}
		n -= l
	}
	return small
}

// RandomType describes size bytes at random: contiguous, a vector, an
// indexed type mixing blocks of a few bytes with blocks of up to 200 KiB,
// or, when many is set, thousands of blocks of a few bytes, whose encoding
// no RTS or CTS holds. Blocks have random gaps between them.
func RandomType(rng *rand.Rand, size int64, many bool) *datatype.Type {
	var typ *datatype.Type
	var err error
	switch k := rng.IntN(3); {
	case size == 0 || k == 0 && !many:
		typ, err = datatype.Contiguous(size)
	case k == 1 && !many:
		bl := int64(1 + rng.IntN(64))
		for size%bl != 0 {
			bl--
		}
		typ, err = datatype.Vector(size/bl, bl, bl+int64(rng.IntN(40)))
	default:
		var lens, disps []int64
		var end int64
		for left := size; left > 0; {
			l := 1 + rng.Int64N(24)
			if !many && rng.IntN(3) == 0 {
				l = datatype.DefaultSmallBlock + rng.Int64N(200<<10)
			}
			l = min(l, left)
			end += int64(rng.IntN(2) * (1 + rng.IntN(40)))
			lens, disps = append(lens, l), append(disps, end)
			end += l
			left -= l
		}
		typ, err = datatype.Indexed(lens, disps)
	}
	if err != nil {
		panic(err)
	}
	return typ
}

// typedGuard fills every byte of a receiver's base that no message may
// touch.
const typedGuard = 0xC3

// RunTypedShapes moves random messages between descriptions and plain
// buffers over a Datatyped stream backend, in one process: a description
// on the sender, the receiver or both, of up to thousands of short blocks
// (no RTS or CTS could hold the encoding), a receiver taking fewer bytes
// than the message (truncated) or its description longer than it. The
// receiver's blocks must hold the sender's reference pack (CRC), every
// other byte of its base its guard; each side's Stats name backend, count
// the bytes, and Staged is exactly the side's blocks shorter than
// Config.SmallBlock within the bytes moved when the backend stages them
// (stages), none otherwise.
func RunTypedShapes(t *testing.T, backend string, stages bool) {
	l := NewLoop(t, backend)
	rng := rand.New(rand.NewPCG(29, 1))
	rts := make([]byte, 1024)
	threshold := int64(0)
	if stages {
		threshold = datatype.DefaultSmallBlock
	}
	for i := range 60 {
		size := []int64{0, 1, 4095, 65536 + 3, 1<<20 + 7, 3 << 20}[i%6]
		room := size
		switch i % 5 {
		case 3:
			room = max(size-4097, 0) // truncated
		case 4:
			room = size + 5000 // the receive is longer than the message
		}
		var s, r Side
		kinds := i / 6 % 3 // 0: type→type, 1: buffer→type, 2: type→buffer
		if kinds != 1 {
			s.Type = RandomType(rng, size, rng.IntN(3) == 0 && size < 1<<20)
			s.Base = make([]byte, s.Type.Extent()+int64(rng.IntN(3)))
		} else {
			s.Base = make([]byte, size)
		}
		for j := range s.Base {
			s.Base[j] = byte(rng.Uint32())
		}
		if kinds != 2 {
			r.Type = RandomType(rng, room, rng.IntN(3) == 0 && room < 1<<20)
			r.Base = make([]byte, r.Type.Extent()+int64(rng.IntN(3)))
		} else {
			r.Base = make([]byte, room)
		}
		for j := range r.Base {
			r.Base[j] = typedGuard
		}
		name := fmt.Sprintf("%d: %d bytes into %d, sender typed %v (%d blocks), receiver typed %v", i, size, room, s.Type != nil, blocks(s.Type), r.Type != nil)
		snd, rcv := l.Start(t, s, r, rts)
		l.Wait(t, snd, rcv)
		moved := min(size, room)
		msg := s.Packed()
		var trunc *lmt.TruncationError
		switch err := rcv.Err(); {
		case room < size && (!errors.As(err, &trunc) || trunc.Len != size || trunc.Cap != room):
			t.Fatalf("%s: receive %v, want a truncation of %d bytes to %d", name, err, size, room)
		case room >= size && err != nil:
			t.Fatalf("%s: receive: %v", name, err)
		case snd.Err() != nil:
			t.Fatalf("%s: send: %v", name, snd.Err())
		}
		want := r.Expect(msg[:moved], typedGuard)
		if got := crc32.ChecksumIEEE(r.Packed()[:moved]); got != crc32.ChecksumIEEE(msg[:moved]) {
			t.Fatalf("%s: received CRC %#x, the reference pack's %#x", name, got, crc32.ChecksumIEEE(msg[:moved]))
		}
		if !bytes.Equal(r.Base, want) {
			at := 0
			for r.Base[at] == want[at] {
				at++
			}
			t.Fatalf("%s: byte %d of the receive base is %#x, want %#x (guard %#x)", name, at, r.Base[at], want[at], typedGuard)
		}
		ss, rs := snd.Stats(), rcv.Stats()
		if ss.Backend != backend || rs.Backend != backend || rs.Bytes != moved {
			t.Fatalf("%s: send via %s, receive via %s of %d bytes, want %s and %d", name, ss.Backend, rs.Backend, rs.Bytes, backend, moved)
		}
		if w := s.SmallWithin(size, threshold); ss.Staged != w {
			t.Fatalf("%s: the sender staged %d bytes, want %d", name, ss.Staged, w)
		}
		if w := r.SmallWithin(moved, threshold); rs.Staged != w {
			t.Fatalf("%s: the receiver staged %d bytes, want %d", name, rs.Staged, w)
		}
		l.Engs[0].Release(snd)
		l.Engs[1].Release(rcv)
	}
}

func blocks(typ *datatype.Type) int64 {
	if typ == nil {
		return 0
	}
	return typ.Blocks()
}

// RunTypedPeerDies: rank 0 sends 64 MiB from a plain buffer to rank 1's
// receive into a description of 8-byte blocks, 8 bytes apart, far too
// long for any CTS, over a stream backend. Rank dying exits once the
// transfer is under way, as a killed rank does: the survivor's transfer
// must fail with a PeerError naming it, a receiver must have written
// nothing between its blocks, and nothing of the job may be left in
// /dev/shm, when it failed, after its Close, or after the job.
func RunTypedPeerDies(t *testing.T, backend string, dying int) {
	job := NewJob(2)
	name := launch.NewJobName()
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Job: name, Timeout: time.Minute, ExitEarly: []int{dying}}, func(p launch.Proc) error {
		ch, eng, err := Open(p, backend, func(c *lmt.Config) { c.Backends = append(c.Backends, pipe.Settings{Size: 64 << 10}) })
		if err != nil {
			return err
		}
		typ, err := datatype.Vector(8<<20, 8, 16)
		if err != nil {
			return err
		}
		var tr *lmt.Transfer
		var base []byte
		if p.Rank == 0 {
			rts := make([]byte, 4096)
			var n int
			if tr, n, err = eng.StartSend(1, [][]byte{make([]byte, typ.Size())}, backend, rts); err != nil {
				return err
			}
			if err := ch.SendRTS(1, rts[:n]); err != nil {
				return err
			}
		} else {
			base = bytes.Repeat([]byte{typedGuard}, int(typ.Extent()))
			r, err := ch.NextRTS(0)
			if err != nil {
				return err
			}
			if tr, err = eng.StartRecvType(0, r, base, typ); err != nil {
				return err
			}
		}
		if p.Rank == dying {
			for !tr.Done() && tr.Moved() < 1<<20 {
				if err := ch.Step(); err != nil {
					return err
				}
			}
			os.Exit(0)
		}
		err = ch.Wait(tr)
		var pe *lmt.PeerError
		if !errors.As(err, &pe) || pe.Rank != dying || !errors.Is(err, lmt.ErrPeerGone) {
			return fmt.Errorf("rank %d after rank %d died: %v, want a PeerError naming it", p.Rank, dying, err)
		}
		if tr.Backend() != backend {
			return fmt.Errorf("rank %d: transfer via %s, want %s", p.Rank, tr.Backend(), backend)
		}
		for off := 8; off < len(base); off += 16 {
			for i, b := range base[off : off+8] {
				if b != typedGuard {
					return fmt.Errorf("byte %d, between blocks, written (%#x)", off+i, b)
				}
			}
		}
		if err := closeLeavingNothing(eng, p.Job); err != nil {
			return err
		}
		return nil
	})
	if _, child := launch.Self(); !child {
		if m := shmLeft(name); len(m) != 0 {
			t.Errorf("after the job, /dev/shm holds %q", m)
		}
	}
}
