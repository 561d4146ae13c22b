package cma_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
)

// newPairWith is newPair with each rank's Config changed by set.
func newPairWith(t testing.TB, backend string, set func(rank int, cfg *lmt.Config)) *pair {
	return lmttest.NewLoopWith(t, set, backend)
}

// smallOrLarge draws a block length on either side of the default
// threshold, at most left.
func smallOrLarge(rng *rand.Rand, left int64) int64 {
	if rng.IntN(2) == 0 {
		return min(left, 1+rng.Int64N(datatype.DefaultSmallBlock-1))
	}
	return min(left, datatype.DefaultSmallBlock+rng.Int64N(200<<10))
}

// mixedShape is a random vector (of small or of large blocks) or indexed
// type mixing small and large blocks, of at most maxBlocks blocks.
func mixedShape(rng *rand.Rand, maxBlocks int) *datatype.Type {
	if rng.IntN(3) == 0 {
		bl := smallOrLarge(rng, math.MaxInt64)
		typ, err := datatype.Vector(1+rng.Int64N(min(int64(maxBlocks), (2<<20)/bl+1)), bl, bl+rng.Int64N(64))
		if err != nil {
			panic(err)
		}
		return typ
	}
	return mixedOfSize(rng, 1+rng.Int64N(3<<20), 0, maxBlocks)
}

// mixedOfSize is an indexed type of size bytes mixing small and large
// blocks, of at most maxBlocks blocks (the last one takes what is left),
// then, if tail > 0, one more block of tail bytes.
func mixedOfSize(rng *rand.Rand, size, tail int64, maxBlocks int) *datatype.Type {
	var lens, disps []int64
	var end int64
	for left := size; left > 0; {
		l := smallOrLarge(rng, left)
		if len(lens) == maxBlocks-1 {
			l = left
		}
		end += int64(rng.IntN(2) * rng.IntN(300))
		lens, disps = append(lens, l), append(disps, end)
		end += l
		left -= l
	}
	if tail > 0 {
		lens, disps = append(lens, tail), append(disps, end+int64(rng.IntN(300)))
	}
	typ, err := datatype.Indexed(lens, disps)
	if err != nil {
		panic(err)
	}
	return typ
}

func smallBytes(typ *datatype.Type) int64 {
	if typ == nil {
		return 0
	}
	return typ.Classify(datatype.DefaultSmallBlock).SmallBytes
}

// TestTypedStagedShapes: descriptions mixing blocks on both sides of
// Config.SmallBlock, on the sender, the receiver or both, on every CMA
// backend, against datatype's reference pack, checksummed; each side's
// Stats.Staged is exactly the bytes of its small blocks, and the rest of
// the message moved in place. A receiver description longer than the
// message takes its first bytes and leaves its other small blocks alone.
func TestTypedStagedShapes(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			p := newPair(t, b)
			rng := rand.New(rand.NewPCG(2007, uint64(len(b))))
			rts := make([]byte, 1<<20)
			// A writing sender gets the receiver's description in the
			// CTS, which has room for a few hundred blocks.
			recvBlocks := 1 << 20
			if b != lmt.CMA {
				recvBlocks = 200
			}
			for i := 0; i < 16; i++ {
				src := mixedShape(rng, 1<<20)
				size := src.Size()
				// Every fourth receiver has a small block past the
				// message, which it must not scatter into.
				extra := int64(0)
				if i%4 == 3 {
					extra = 1 + rng.Int64N(datatype.DefaultSmallBlock-1)
				}
				dst := mixedOfSize(rng, size, extra, recvBlocks-1)
				switch i % 3 {
				case 1:
					src = nil
				case 2:
					dst = nil
				}
				if dst == nil {
					extra = 0
				}
				sbase, rbase, want := stagedCase(rng, src, dst, size)
				s, r := sendTyped(t, p, sbase, src, rbase, dst, rts)
				if s.Err() != nil || r.Err() != nil {
					t.Fatalf("case %d (%d bytes): sender %v, receiver %v", i, size, s.Err(), r.Err())
				}
				if crc32.ChecksumIEEE(rbase) != crc32.ChecksumIEEE(want) || !bytes.Equal(rbase, want) {
					t.Fatalf("case %d (%d bytes, %v into %v): the receiver's buffer differs from the reference unpack", i, size, describe(src), describe(dst))
				}
				rwant := smallBytes(dst) - extra
				if got := s.Stats().Staged; got != smallBytes(src) {
					t.Errorf("case %d: the sender staged %d bytes, its small blocks hold %d", i, got, smallBytes(src))
				}
				if got := r.Stats(); got.Staged != rwant || got.Bytes != size {
					t.Errorf("case %d: the receiver staged %d of %d bytes, want %d of %d", i, got.Staged, got.Bytes, rwant, size)
				}
				p.Engs[0].Release(s)
				p.Engs[1].Release(r)
			}
		})
	}
}

// stagedCase is typedCase for a receiver description that may hold more
// than the size bytes sent: the reference unpack fills its first ones.
func stagedCase(rng *rand.Rand, src, dst *datatype.Type, size int64) (sbase, rbase, want []byte) {
	sbase = randomBytes(rng, extent(src, size))
	packed := sbase[:size]
	if src != nil {
		packed = make([]byte, size)
		src.Pack(packed, sbase)
	}
	rbase = randomBytes(rng, extent(dst, size))
	want = append([]byte(nil), rbase...)
	if dst == nil {
		copy(want, packed)
		return sbase, rbase, want
	}
	c := dst.Cursor()
	if n, err := c.Unpack(want, packed); err != nil || int64(n) != size {
		panic(err)
	}
	return sbase, rbase, want
}

// TestTypedStagedCalls: 2^20 blocks of 8 bytes on one side against a
// plain buffer cross in two process_vm_readv calls of cma.Settings.Chunk
// (4 MiB) once staged, where naming every block took one call per
// IOV_MAX blocks (8 KiB), 1024 calls: Config.SmallBlock 1 stages nothing.
func TestTypedStagedCalls(t *testing.T) {
	vec, _ := datatype.Vector(1<<20, 8, 16)
	for _, c := range []struct {
		name       string
		smallBlock int
		calls      int
		staged     int64
	}{
		{"default", 0, 2, vec.Size()},
		{"staging off", 1, 1024, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPairWith(t, lmt.CMA, func(_ int, cfg *lmt.Config) { cfg.SmallBlock = c.smallBlock })
			rng := rand.New(rand.NewPCG(8, 8))
			for _, sender := range []bool{true, false} {
				src, dst := vec, (*datatype.Type)(nil)
				if !sender {
					src, dst = nil, vec
				}
				sbase, rbase, want := typedCase(rng, src, dst, vec.Size())
				s, r := sendTyped(t, p, sbase, src, rbase, dst, make([]byte, 4096))
				if err := errors.Join(s.Err(), r.Err()); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rbase, want) {
					t.Fatalf("typed sender %v: the receiver's buffer differs from the reference", sender)
				}
				typedSide := r
				if sender {
					typedSide = s
				}
				if got := r.Stats().Syscalls; got != c.calls {
					t.Errorf("typed sender %v: the receiver made %d calls, want %d", sender, got, c.calls)
				}
				if got := typedSide.Stats().Staged; got != c.staged {
					t.Errorf("typed sender %v: the typed side staged %d bytes, want %d", sender, got, c.staged)
				}
				p.Engs[0].Release(s)
				p.Engs[1].Release(r)
			}
		})
	}
}

// TestTypedStagedThresholds: the two engines stage by different
// thresholds; each side's blocks are laid out by its own, which its handle
// carries, so the peer names them where their owner put them. Both sides
// typed with the same mixed description, on every CMA backend.
func TestTypedStagedThresholds(t *testing.T) {
	thresholds := [2]int{datatype.DefaultSmallBlock, 100 << 10}
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			p := newPairWith(t, b, func(r int, cfg *lmt.Config) { cfg.SmallBlock = thresholds[r] })
			rng := rand.New(rand.NewPCG(100, uint64(len(b))))
			for i := 0; i < 6; i++ {
				typ := mixedOfSize(rng, 1<<20+rng.Int64N(1<<20), 0, 200)
				sbase, rbase, want := typedCase(rng, typ, typ, typ.Size())
				s, r := sendTyped(t, p, sbase, typ, rbase, typ, make([]byte, 4096))
				if err := errors.Join(s.Err(), r.Err()); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rbase, want) {
					t.Fatalf("case %d: the receiver's buffer differs from the reference unpack", i)
				}
				got := [2]int64{s.Stats().Staged, r.Stats().Staged}
				small := [2]int64{typ.Classify(int64(thresholds[0])).SmallBytes, typ.Classify(int64(thresholds[1])).SmallBytes}
				if got != small || small[0] == small[1] {
					t.Fatalf("case %d: staged %v bytes (sender, receiver), want %v, which differ", i, got, small)
				}
				p.Engs[0].Release(s)
				p.Engs[1].Release(r)
			}
		})
	}
}

// TestTypedStagedCorruptHandle: a typed handle whose small-block
// threshold is negative, or whose staging buffer wraps around the
// address space, fails the receive naming the field, before anything of
// the receiver's buffer is written.
func TestTypedStagedCorruptHandle(t *testing.T) {
	src, _ := datatype.Vector(4096, 8, 16)
	enc := src.AppendEncode(nil)
	cases := []struct {
		field string
		at    int // from the start of the encoding
		value uint64
	}{
		{"small-block threshold of a typed handle", -8, 1 << 63},
		{"staging address of a typed handle", -16, math.MaxUint64 - 100},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			err := refusedTypedRecv(t, src, func(rts []byte) {
				binary.LittleEndian.PutUint64(rts[len(rts)-len(enc)+c.at:], c.value)
			})
			var ce *lmt.CorruptError
			if !errors.As(err, &ce) || ce.Field != c.field || ce.Rank != 0 {
				t.Fatalf("receiver: %v, want a CorruptError of rank 0 naming %q", err, c.field)
			}
		})
	}
}
