package datatype

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestResumeAtAnyPosition: a cursor set to any packed position packs
// exactly the reference's tail, and packing in random chunks, each from a
// fresh copy of the saved cursor, gives the reference.
func TestResumeAtAnyPosition(t *testing.T) {
	eachShape(t, 120, func(t *testing.T, s shape, r *rand.Rand) {
		src := pattern(s.extent(), 0x33)
		want := refPack(s, src)
		size := int64(len(want))
		step := max(1, size/97) // every position of small shapes, ~100 of large ones
		for pos := int64(0); pos <= size; pos += step {
			c := s.t.Cursor()
			if err := c.SetPos(pos); err != nil || c.Pos() != pos {
				t.Fatalf("SetPos(%d) = %v, Pos %d", pos, err, c.Pos())
			}
			got := make([]byte, size-pos+1)
			n, err := c.Pack(got, src)
			if err != nil || !bytes.Equal(got[:n], want[pos:]) {
				t.Fatalf("pack from %d: %d bytes, %v; differ from the reference tail", pos, n, err)
			}
		}
		var got []byte
		c := s.t.Cursor()
		for {
			// A copied cursor is a saved position; the original is moved
			// by SetPos, so both ways of resuming are exercised.
			saved := c
			chunk := make([]byte, 1+r.IntN(50))
			n, err := saved.Pack(chunk, src)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			got = append(got, chunk[:n]...)
			if err := c.SetPos(c.Pos() + int64(n)); err != nil {
				t.Fatal(err)
			}
			if saved.Pos() != c.Pos() {
				t.Fatalf("cursor after packing %d bytes is at %d, one set there says %d", n, saved.Pos(), c.Pos())
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("chunked pack differs from the reference")
		}
	})
}

func TestSetPosOutOfRange(t *testing.T) {
	ty, err := Indexed([]int64{3, 70}, []int64{0, 10})
	if err != nil {
		t.Fatal(err)
	}
	c := ty.Cursor()
	c.Next(5)
	for pos, want := range map[int64]string{
		-1: "datatype: position out of range: position -1 in a 73-byte stream",
		74: "datatype: position out of range: position 74 in a 73-byte stream",
	} {
		if err := c.SetPos(pos); !errors.Is(err, ErrRange) || err.Error() != want || c.Pos() != 3 {
			t.Errorf("SetPos(%d) = %v, now at %d; want %q, still at 3", pos, err, c.Pos(), want)
		}
	}
	c = ty.Select(Small, 64)
	c.Next(2)
	want := "datatype: position out of range: position 4 in a 3-byte small (< 64 B) stream"
	if err := c.SetPos(4); !errors.Is(err, ErrRange) || err.Error() != want || c.Pos() != 2 {
		t.Errorf("small SetPos(4) = %v, now at %d; want %q, still at 2", err, c.Pos(), want)
	}
}

// TestIovecBatchesCoverTheDescribedBytes fills batches of random sizes
// under random budgets: the entries, in order, hold exactly the reference
// pack, each described byte once and nothing else.
func TestIovecBatchesCoverTheDescribedBytes(t *testing.T) {
	eachShape(t, 150, func(t *testing.T, s shape, r *rand.Rand) {
		src := pattern(s.extent(), 0x71)
		want := refPack(s, src)
		var base uintptr
		if len(src) > 0 {
			base = uintptr(unsafe.Pointer(&src[0]))
		}
		local, remote := s.t.Cursor(), s.t.Cursor()
		var got, gotRemote []byte
		for {
			iov := make([]unix.Iovec, 1+r.IntN(4))
			riov := make([]unix.RemoteIovec, len(iov))
			budget := 1 + r.Int64N(80)
			n, nb, err := local.FillIovec(src, iov, budget)
			rn, rnb, rerr := remote.FillRemoteIovec(base, riov, budget)
			if err != nil || rerr != nil || n != rn || nb != rnb || nb > budget {
				t.Fatalf("FillIovec = %d, %d, %v; FillRemoteIovec = %d, %d, %v; budget %d", n, nb, err, rn, rnb, rerr, budget)
			}
			if n == 0 {
				if nb != 0 || local.Pos() != int64(len(want)) {
					t.Fatalf("batch ended at %d of %d bytes", local.Pos(), len(want))
				}
				break
			}
			var sum int64
			for i := range n {
				if iov[i].Len == 0 || uintptr(unsafe.Pointer(iov[i].Base)) != riov[i].Base || int(iov[i].Len) != riov[i].Len {
					t.Fatalf("entry %d: local %p+%d, remote %#x+%d", i, iov[i].Base, iov[i].Len, riov[i].Base, riov[i].Len)
				}
				if i > 0 && riov[i].Base == riov[i-1].Base+uintptr(riov[i-1].Len) {
					t.Fatalf("entries %d and %d touch and were not merged", i-1, i)
				}
				got = append(got, unsafe.Slice(iov[i].Base, iov[i].Len)...)
				off := riov[i].Base - base
				gotRemote = append(gotRemote, src[off:off+uintptr(riov[i].Len)]...)
				sum += int64(iov[i].Len)
			}
			if sum != nb {
				t.Fatalf("entries cover %d bytes, FillIovec said %d", sum, nb)
			}
		}
		if !bytes.Equal(got, want) || !bytes.Equal(gotRemote, want) {
			t.Fatalf("iovec batches differ from the reference pack")
		}
	})
}

func TestFillIovecShortBase(t *testing.T) {
	ty, err := Vector(2, 8, 16)
	if err != nil {
		t.Fatal(err)
	}
	c := ty.Cursor()
	n, nb, err := c.FillIovec(make([]byte, 23), make([]unix.Iovec, 4), 100)
	want := "datatype: buffer too short: base buffer of 23 bytes, the description reaches byte 24"
	if n != 0 || nb != 0 || !errors.Is(err, ErrShortBuffer) || err.Error() != want || c.Pos() != 0 {
		t.Fatalf("FillIovec = %d, %d, %v, pos %d; want 0, 0, %q, 0", n, nb, err, c.Pos(), want)
	}
	_, _, err = c.FillRemoteIovec(^uintptr(0)-16, make([]unix.RemoteIovec, 4), 100)
	if !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("FillRemoteIovec near the top of the address space = %v; want ErrShortBuffer", err)
	}
}

// TestMillionBlocksWalkWithoutAllocation walks 1M blocks of 8 B, indexed
// and vector, by Next, by iovec batches and by Pack.
func TestMillionBlocksWalkWithoutAllocation(t *testing.T) {
	const blocks, blen = 1 << 20, 8
	lens, disps := make([]int64, blocks), make([]int64, blocks)
	for i := range lens {
		lens[i], disps[i] = blen, int64(i)*2*blen
	}
	indexed, err := Indexed(lens, disps)
	if err != nil {
		t.Fatal(err)
	}
	vector, err := Vector(blocks, blen, 2*blen)
	if err != nil {
		t.Fatal(err)
	}
	base := pattern(2*blen*blocks, 9)
	packed := make([]byte, blen*blocks)
	iov := make([]unix.Iovec, 1024)
	for _, ty := range []*Type{indexed, vector} {
		var pieces, entries int
		var covered int64
		allocs := testing.AllocsPerRun(1, func() {
			pieces, entries, covered = 0, 0, 0
			c := ty.Cursor()
			for _, n := c.Next(1 << 30); n > 0; _, n = c.Next(1 << 30) {
				pieces++
			}
			c = ty.Cursor()
			for {
				n, nb, _ := c.FillIovec(base, iov, 1<<30)
				if n == 0 {
					break
				}
				entries += n
				covered += nb
			}
			c = ty.Cursor()
			c.SetPos(blen*blocks/2 + 3)
			c.Pack(packed, base)
		})
		if allocs != 0 || pieces != blocks || entries != blocks || covered != blen*blocks {
			t.Errorf("%v: %v allocations, %d pieces, %d entries, %d bytes; want 0, %d, %d, %d",
				ty.kind, allocs, pieces, entries, covered, blocks, blocks, blen*blocks)
		}
	}
}
