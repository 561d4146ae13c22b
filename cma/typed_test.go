package cma_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
)

// pair is two engines of this process joined by lmttest's control
// channel of fixed buffers, so that a steady-state message allocates
// nothing in the test's own plumbing either. CMA between two engines of
// one process reads and writes this process's memory, through the same
// system calls as between two.
type pair = lmttest.Loop

func newPair(t testing.TB, backend string) *pair { return lmttest.NewLoop(t, backend) }

// shape is a random description of size bytes: contiguous, a vector or
// an indexed type of random blocks and gaps.
// An indexed type's blocks are at most maxBlock bytes long.
func shape(rng *rand.Rand, size, maxBlock int64) *datatype.Type {
	var typ *datatype.Type
	var err error
	switch k := rng.IntN(3); {
	case k == 0 || size == 0:
		typ, err = datatype.Contiguous(size)
	case k == 1:
		bl := int64(1 + rng.IntN(64))
		for size%bl != 0 {
			bl--
		}
		typ, err = datatype.Vector(size/bl, bl, bl+int64(rng.IntN(3))*int64(rng.IntN(100)))
	default:
		var lens, disps []int64
		var end int64
		for left := size; left > 0; {
			l := min(left, 1+rng.Int64N(maxBlock))
			end += int64(rng.IntN(2) * rng.IntN(300))
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

func randomBytes(rng *rand.Rand, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// sendTyped moves src's description of sbase into dst's description of
// rbase (either nil: a plain buffer of the other's size) and returns both
// transfers, complete.
func sendTyped(t testing.TB, p *pair, sbase []byte, src *datatype.Type, rbase []byte, dst *datatype.Type, rts []byte) (*lmt.Transfer, *lmt.Transfer) {
	t.Helper()
	s, r := p.Start(t, lmttest.Side{Type: src, Base: sbase}, lmttest.Side{Type: dst, Base: rbase}, rts)
	p.Wait(t, s, r)
	return s, r
}

// TestTypedRandomShapes: random sender and receiver descriptions of the
// same size (or a plain buffer on one side) against the reference pack:
// the receiver's blocks hold the sender's packed stream, and every byte
// outside them is as it was.
func TestTypedRandomShapes(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			p := newPair(t, b)
			rng := rand.New(rand.NewPCG(29, uint64(len(b))))
			rts := make([]byte, 1<<20)
			for i := 0; i < 24; i++ {
				size := int64(rng.IntN(3 << 20))
				// The CTS carries the receiver's description to a
				// writing sender: a few hundred blocks fit.
				src, dst := shape(rng, size, 4096), shape(rng, size, 4096)
				if b != lmt.CMA {
					dst = shape(rng, size, 64<<10)
				}
				plain := i % 4 // 0: both typed, 1: plain sender, 2: plain receiver
				if plain == 1 {
					src = nil
				}
				if plain == 2 {
					dst = nil
				}
				sbase, rbase, want := typedCase(rng, src, dst, size)
				s, r := sendTyped(t, p, sbase, src, rbase, dst, rts)
				if s.Err() != nil || r.Err() != nil {
					t.Fatalf("case %d (%d bytes): sender %v, receiver %v", i, size, s.Err(), r.Err())
				}
				if crc32.ChecksumIEEE(rbase) != crc32.ChecksumIEEE(want) || !bytes.Equal(rbase, want) {
					t.Fatalf("case %d (%d bytes, %v into %v): the receiver's buffer differs from the reference unpack", i, size, describe(src), describe(dst))
				}
				p.Engs[0].Release(s)
				p.Engs[1].Release(r)
			}
		})
	}
}

// typedCase makes a sender base, a receiver base of random bytes, and the
// receiver base the transfer must leave: the sender's reference pack
// unpacked over a copy of it.
func typedCase(rng *rand.Rand, src, dst *datatype.Type, size int64) (sbase, rbase, want []byte) {
	sbase = randomBytes(rng, extent(src, size))
	packed := sbase
	if src != nil {
		packed = make([]byte, size)
		if _, err := src.Pack(packed, sbase); err != nil {
			panic(err)
		}
	}
	rbase = randomBytes(rng, extent(dst, size))
	want = append([]byte(nil), rbase...)
	if dst != nil {
		if _, err := dst.Unpack(want, packed); err != nil {
			panic(err)
		}
	} else {
		copy(want, packed)
	}
	return sbase, rbase, want
}

func extent(t *datatype.Type, size int64) int64 {
	if t == nil {
		return size
	}
	return t.Extent() + 7 // bytes past the extent must stay untouched too
}

func describe(t *datatype.Type) string {
	if t == nil {
		return "a plain buffer"
	}
	return fmt.Sprintf("%d blocks over %d bytes", t.Blocks(), t.Extent())
}

// TestTypedTruncation: a receiver description shorter than the message
// takes its first bytes, reports the exact lengths, and writes nothing
// past its blocks.
func TestTypedTruncation(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			p := newPair(t, b)
			rng := rand.New(rand.NewPCG(7, 29))
			src, _ := datatype.Vector(100000, 8, 24)
			dst, _ := datatype.Vector(30000, 16, 20)
			sbase, rbase, _ := typedCase(rng, src, dst, src.Size())
			packed := make([]byte, src.Size())
			src.Pack(packed, sbase)
			want := append([]byte(nil), rbase...)
			dst.Unpack(want, packed[:dst.Size()])
			s, r := sendTyped(t, p, sbase, src, rbase, dst, make([]byte, 4096))
			var te *lmt.TruncationError
			if !errors.As(r.Err(), &te) || te.Len != src.Size() || te.Cap != dst.Size() {
				t.Fatalf("receiver error %v, want a TruncationError of %d to %d bytes", r.Err(), src.Size(), dst.Size())
			}
			if !bytes.Equal(rbase, want) {
				t.Fatal("the truncated receive differs from the reference unpack of the first bytes")
			}
			// Every block is small: the sender staged all it had, the
			// receiver scattered all it took.
			if got, want := [2]int64{s.Stats().Staged, r.Stats().Staged}, [2]int64{src.Size(), dst.Size()}; got != want {
				t.Errorf("staged %v bytes (sender, receiver), want %v", got, want)
			}
		})
	}
}

// TestTypedShortBase: a description reaching past its base buffer is
// refused at the start, naming the extent, on either side.
func TestTypedShortBase(t *testing.T) {
	p := newPair(t, lmt.CMA)
	typ, _ := datatype.Vector(1000, 8, 16)
	short := make([]byte, typ.Extent()-1)
	check := func(side string, err error) {
		var fe *datatype.FieldError
		if !errors.As(err, &fe) || fe.Field != "extent" || fe.Value != typ.Extent() || !errors.Is(err, datatype.ErrShortBuffer) {
			t.Errorf("%s: %v, want a FieldError naming the extent %d, wrapping ErrShortBuffer", side, err, typ.Extent())
		}
	}
	_, _, err := p.Engs[0].StartSendType(1, short, typ, "", make([]byte, 4096))
	check("send", err)
	rts := make([]byte, 4096)
	s, k, err := p.Engs[0].StartSend(1, [][]byte{make([]byte, typ.Size())}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Engs[1].StartRecvType(0, rts[:k], short, typ)
	check("receive", err)
	p.Engs[0].PeerFailed(1, errors.New("test over")) // s has no receiver
	_ = s
}

// TestTypedCorruptHandle: an RTS whose description is malformed, or holds
// fewer bytes than the message, fails the receive with an error naming
// the field, and nothing of the receiver's buffer is written.
func TestTypedCorruptHandle(t *testing.T) {
	src, _ := datatype.Vector(4096, 8, 16)
	enc := src.AppendEncode(nil)
	cases := []struct {
		name  string
		patch func(h []byte) // the encoding at the end of the RTS
		is    error
	}{
		{"kind byte", func(h []byte) { h[0] = 0x07 }, datatype.ErrEncoding},
		{"stride below blockLen", func(h []byte) { h[len(h)-1] = 4 }, datatype.ErrInvalid},
		{"count shorter than the message", func(h []byte) { h[1], h[2] = 0x80, 0x10 }, nil}, // 2048 blocks
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := refusedTypedRecv(t, src, func(rts []byte) {
				h := rts[len(rts)-len(enc):]
				if !bytes.Equal(h, enc) {
					t.Fatal("the RTS does not end with the description's encoding")
				}
				c.patch(h)
			})
			if !errors.Is(err, lmt.ErrCorrupt) || c.is != nil && !errors.Is(err, c.is) {
				t.Fatalf("receiver: %v, want a CorruptError wrapping %v", err, c.is)
			}
			var ce *lmt.CorruptError
			if errors.As(err, &ce); ce == nil || ce.Field != "datatype of a typed handle" || ce.Rank != 0 {
				t.Fatalf("receiver: %v, want the field \"datatype of a typed handle\" of rank 0", err)
			}
		})
	}
}

// refusedTypedRecv sends src's message by CMA from a typed sender, lets
// patch spoil the RTS, and returns the error the receive ends with,
// having checked that the sender failed too and that the refused receive
// wrote nothing into its buffer.
func refusedTypedRecv(t *testing.T, src *datatype.Type, patch func(rts []byte)) error {
	t.Helper()
	p := newPair(t, lmt.CMA)
	sbase := randomBytes(rand.New(rand.NewPCG(1, 2)), src.Extent())
	rts := make([]byte, 4096)
	s, k, err := p.Engs[0].StartSendType(1, sbase, src, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	patch(rts[:k])
	rbuf := make([]byte, src.Size())
	r, err := p.Engs[1].StartRecv(0, rts[:k], [][]byte{rbuf})
	if err != nil {
		t.Fatal(err)
	}
	p.Wait(t, r, s)
	if s.Err() == nil {
		t.Error("the sender completed without error")
	}
	if bytes.Count(rbuf, []byte{0}) != len(rbuf) {
		t.Error("the refused receive wrote into its buffer")
	}
	return r.Err()
}

// TestTypedMillionBlocks: a vector and an indexed type of 2^20 blocks of
// 8 bytes, on the sender, the receiver or both (the other side a plain
// buffer), steady state: no allocation per message, whatever the block
// count, though every block is staged (Config.SmallBlock). The vector's
// handle is a few dozen bytes; the indexed one takes 2 bytes a block
// (gap, length).
func TestTypedMillionBlocks(t *testing.T) {
	const blocks = 1 << 20
	vec, _ := datatype.Vector(blocks, 8, 16)
	lens, disps := make([]int64, blocks), make([]int64, blocks)
	for i := range lens {
		lens[i], disps[i] = 8, int64(i)*16+int64(i%2)*4
	}
	idx, err := datatype.Indexed(lens, disps)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []*datatype.Type{vec, idx} {
		for _, side := range []string{"sender", "receiver", "both"} {
			t.Run(fmt.Sprintf("%d-byte encoding, typed %s", typ.EncodedLen(), side), func(t *testing.T) {
				p := newPair(t, lmt.CMA)
				rng := rand.New(rand.NewPCG(3, 4))
				src, dst := typ, typ
				switch side {
				case "sender":
					dst = nil
				case "receiver":
					src = nil
				}
				sbase, rbase, want := typedCase(rng, src, dst, typ.Size())
				rts := make([]byte, 128+typ.EncodedLen())
				var err error
				var staged [2]int64
				allocs := testing.AllocsPerRun(3, func() {
					s, r := sendTyped(t, p, sbase, src, rbase, dst, rts)
					err = errors.Join(s.Err(), r.Err())
					staged = [2]int64{s.Stats().Staged, r.Stats().Staged}
					p.Engs[0].Release(s)
					p.Engs[1].Release(r)
				})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rbase, want) {
					t.Fatal("the receiver's buffer differs from the reference pack")
				}
				if want := [2]int64{smallBytes(src), smallBytes(dst)}; staged != want {
					t.Errorf("staged %v bytes (sender, receiver), want %v", staged, want)
				}
				if allocs != 0 {
					t.Errorf("%v allocations per message of %d blocks, want 0", allocs, typ.Blocks())
				}
			})
		}
	}
}
