package datatype

import (
	"testing"

	"golang.org/x/sys/unix"
)

// benchIndexed is the shape of NewMadeleine's indexed benchmark repeated:
// blocks alternate 64 B and 256 KiB, each after a 64-byte gap.
func benchIndexed(tb testing.TB, blocks int) *Type {
	tb.Helper()
	lens, disps := make([]int64, blocks), make([]int64, blocks)
	var end int64
	for i := range lens {
		lens[i] = 64
		if i%2 == 1 {
			lens[i] = 256 << 10
		}
		disps[i] = end + 64
		end = disps[i] + lens[i]
	}
	ty, err := Indexed(lens, disps)
	if err != nil {
		tb.Fatal(err)
	}
	return ty
}

// BenchmarkIndexed compares, on 1,000 blocks mixing 64 B and 256 KiB,
// packing the whole message (what MPICH does) with walking it into iovec
// batches (what CMA and knem take) and with NewMadeleine's split: small
// blocks packed, large ones walked. Compare time per operation: the walks
// move no bytes themselves (the kernel's copy is lmtbench's to measure),
// so only pack reports a rate.
func BenchmarkIndexed(b *testing.B) {
	ty := benchIndexed(b, 1000)
	base := pattern(ty.Extent(), 7)
	b.Run("pack", func(b *testing.B) {
		packed := make([]byte, ty.Size())
		b.SetBytes(ty.Size())
		for b.Loop() {
			ty.Pack(packed, base)
		}
	})
	iov := make([]unix.Iovec, 64)
	b.Run("cursor", func(b *testing.B) {
		for b.Loop() {
			c := ty.Cursor()
			for n, _, _ := c.FillIovec(base, iov, ty.Size()); n > 0; n, _, _ = c.FillIovec(base, iov, ty.Size()) {
			}
		}
	})
	b.Run("aggregate-small", func(b *testing.B) {
		const threshold = 4096
		agg := make([]byte, ty.Classify(threshold).SmallBytes)
		for b.Loop() {
			small := ty.Select(Small, threshold)
			small.Pack(agg, base)
			large := ty.Select(Large, threshold)
			for n, _, _ := large.FillIovec(base, iov, ty.Size()); n > 0; n, _, _ = large.FillIovec(base, iov, ty.Size()) {
			}
		}
	})
}
