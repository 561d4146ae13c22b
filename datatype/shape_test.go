package datatype

import (
	"math/rand/v2"
	"testing"
)

// block is a reference block: offset in the base buffer and length.
type block struct{ off, n int64 }

// shape is a random description together with its blocks, computed
// independently of the package's own walk.
type shape struct {
	name   string
	t      *Type
	blocks []block
}

func (s shape) extent() int64 {
	var e int64
	for _, b := range s.blocks {
		e = max(e, b.off+b.n)
	}
	return e
}

// randomShape draws a contiguous, vector or indexed description, some
// with blocks past memcopy.BulkMin so both copy paths run.
func randomShape(tb testing.TB, r *rand.Rand) shape {
	tb.Helper()
	big := int64(1)
	if r.IntN(8) == 0 {
		big = 300
	}
	switch r.IntN(3) {
	case 0:
		size := r.Int64N(200 * big)
		ty, err := Contiguous(size)
		if err != nil {
			tb.Fatal(err)
		}
		return shape{"contiguous", ty, []block{{0, size}}}
	case 1:
		count, bl := r.Int64N(40), 1+r.Int64N(20*big)
		stride := bl + r.Int64N(16)
		ty, err := Vector(count, bl, stride)
		if err != nil {
			tb.Fatal(err)
		}
		s := shape{name: "vector", t: ty}
		for i := range count {
			s.blocks = append(s.blocks, block{i * stride, bl})
		}
		return s
	}
	n := r.IntN(60)
	lens, disps := make([]int64, n), make([]int64, n)
	var end int64
	s := shape{name: "indexed"}
	for i := range n {
		if r.IntN(6) > 0 {
			lens[i] = 1 + r.Int64N(40*big)
		}
		disps[i] = end + r.Int64N(3)*r.Int64N(20)
		end = disps[i] + lens[i]
		s.blocks = append(s.blocks, block{disps[i], lens[i]})
	}
	ty, err := Indexed(lens, disps)
	if err != nil {
		tb.Fatal(err)
	}
	s.t = ty
	return s
}

// refPack packs with the built-in copy, block by block.
func refPack(s shape, src []byte) []byte {
	var out []byte
	for _, b := range s.blocks {
		out = append(out, src[b.off:b.off+b.n]...)
	}
	return out
}

// pattern fills n bytes that differ at every position of a 251-byte cycle.
func pattern(n int64, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i%251) ^ seed
	}
	return p
}

// eachShape runs f on count random shapes from each of two fixed seeds.
func eachShape(t *testing.T, count int, f func(t *testing.T, s shape, r *rand.Rand)) {
	for _, seed := range []uint64{1, 29} {
		r := rand.New(rand.NewPCG(seed, 2007))
		for i := range count {
			s := randomShape(t, r)
			f(t, s, r)
			if t.Failed() {
				t.Fatalf("seed %d shape %d (%s, %d blocks, size %d)", seed, i, s.name, s.t.Blocks(), s.t.Size())
			}
		}
	}
}
