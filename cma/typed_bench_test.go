package cma_test

import (
	"testing"
	"time"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/lmt"
)

// smallLarge is the indexed shape of Aumage, Brunet, Furmento and Namyst,
// "NewMadeleine: a fast communication scheduling engine for high
// performance networks" (CAC 2007, §5.3): blocks of 64 bytes and of 256
// KiB, alternating, here 1,000 of them with 64-byte gaps.
func smallLarge() *datatype.Type {
	lens, disps := make([]int64, 1000), make([]int64, 1000)
	var end int64
	for i := range lens {
		lens[i] = 64
		if i%2 == 1 {
			lens[i] = 256 << 10
		}
		disps[i] = end + 64
		end = disps[i] + lens[i]
	}
	t, err := datatype.Indexed(lens, disps)
	if err != nil {
		panic(err)
	}
	return t
}

// BenchmarkTypedVsPack sends a description from one engine to another of
// this process over cma, in the same run both ways: the typed path
// (StartSendType, StartRecvType: large blocks moved in place, blocks under
// Config.SmallBlock staged), and as MPICH does, the whole message packed
// into a contiguous buffer, sent, and unpacked. It reports the time of
// each per message and pack/typed, above 1 when the typed path wins: the
// §5.3 indexed type on both sides (its 64-byte blocks staged, its 256 KiB
// ones in place), and a vector of 2^20 blocks of 8 bytes on one side, all
// staged, where naming each block to process_vm_readv took a call per
// IOV_MAX blocks (8 KiB) and a page pin per block of the remote list.
func BenchmarkTypedVsPack(b *testing.B) {
	vec, _ := datatype.Vector(1<<20, 8, 16)
	sl := smallLarge()
	b.Run("indexed-64B-256KiB", func(b *testing.B) { benchVsPack(b, sl, sl) })
	b.Run("vector-1M-8B-sender", func(b *testing.B) { benchVsPack(b, vec, nil) })
	b.Run("vector-1M-8B-receiver", func(b *testing.B) { benchVsPack(b, nil, vec) })
}

// benchVsPack moves the description src (nil: contiguous) into dst.
func benchVsPack(b *testing.B, src, dst *datatype.Type) {
	typ := src
	if typ == nil {
		typ = dst
	}
	p := newPair(b, lmt.CMA)
	sbase, rbase := make([]byte, extent(src, typ.Size())), make([]byte, extent(dst, typ.Size()))
	spack, rpack := make([]byte, typ.Size()), make([]byte, typ.Size())
	rts := make([]byte, 128+typ.EncodedLen())
	// One message first, so that the typed path's pooled transfers have
	// their staging buffers, as the packed path has its pack buffers.
	s, r := sendTyped(b, p, sbase, src, rbase, dst, rts)
	p.Engs[0].Release(s)
	p.Engs[1].Release(r)
	var typed, packed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		s, r := sendTyped(b, p, sbase, src, rbase, dst, rts)
		t1 := time.Now()
		p.Engs[0].Release(s)
		p.Engs[1].Release(r)
		t2 := time.Now()
		if src != nil {
			src.Pack(spack, sbase)
		}
		s, r = sendTyped(b, p, spack, nil, rpack, nil, rts)
		if dst != nil {
			dst.Unpack(rbase, rpack)
		}
		t3 := time.Now()
		p.Engs[0].Release(s)
		p.Engs[1].Release(r)
		typed += t1.Sub(t0)
		packed += t3.Sub(t2)
	}
	b.ReportMetric(float64(typed.Nanoseconds())/float64(b.N), "ns-typed/msg")
	b.ReportMetric(float64(packed.Nanoseconds())/float64(b.N), "ns-pack/msg")
	b.ReportMetric(float64(packed)/float64(typed), "pack/typed")
}
