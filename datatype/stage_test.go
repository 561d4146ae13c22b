package datatype

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestStageLayout: a Stage packs exactly the blocks shorter than its
// threshold, in stream order, as many bytes as Classify counts; the
// staged iovec lists, local and remote, name the whole stream in order,
// in exactly as many entries as the layout has runs of touching pieces;
// and Unpack scatters back only the small blocks within its limit.
func TestStageLayout(t *testing.T) {
	var st Stage // reused across shapes, as a pooled transfer does
	eachShape(t, 150, func(t *testing.T, s shape, r *rand.Rand) {
		threshold := r.Int64N(50)
		src := pattern(s.extent(), 0x3c)
		var want []byte
		runs, end, endStaged := 0, int64(-1), false
		for _, b := range s.blocks {
			if b.n == 0 {
				continue
			}
			off, staged := b.off, b.n < threshold
			if staged {
				off = int64(len(want))
				want = append(want, src[b.off:b.off+b.n]...)
			}
			if off != end || staged != endStaged {
				runs++
			}
			end, endStaged = off+b.n, staged
		}
		st.Reset(s.t, threshold)
		if st.Bytes() != int64(len(want)) || st.Bytes() != s.t.Classify(threshold).SmallBytes {
			t.Fatalf("Bytes() = %d, want %d (Classify: %d)", st.Bytes(), len(want), s.t.Classify(threshold).SmallBytes)
		}
		staging := make([]byte, len(want)+1)
		staging[len(want)] = 0xee
		if n, err := st.Pack(staging, src); err != nil || n != int64(len(want)) {
			t.Fatalf("Pack = %d, %v; want %d", n, err, len(want))
		}
		if !bytes.Equal(staging[:len(want)], want) || staging[len(want)] != 0xee {
			t.Fatal("the staging buffer differs from the small blocks in order, or Pack wrote past them")
		}
		ref := refPack(s, src)
		checkStagedIovec(t, &st, s, src, staging, ref, runs)
		checkStagedRemote(t, &st, s, src, staging, ref)

		limit := r.Int64N(s.t.Size() + 1)
		dst := pattern(s.extent(), 0xa5)
		wantDst := append([]byte(nil), dst...)
		var pos, scattered int64
		for _, b := range s.blocks {
			if b.n > 0 && b.n < threshold && pos < limit {
				k := min(b.n, limit-pos)
				copy(wantDst[b.off:b.off+k], src[b.off:b.off+k])
				scattered += k
			}
			pos += b.n
		}
		if n, err := st.Unpack(dst, staging, limit); err != nil || n != scattered || !bytes.Equal(dst, wantDst) {
			t.Fatalf("Unpack(limit %d) = %d, %v; want %d bytes of the small blocks only", limit, n, err, scattered)
		}
	})
}

// checkStagedIovec walks the staged local iovecs in batches of 3 entries
// and 7 bytes, then in one call, against the reference stream.
func checkStagedIovec(t *testing.T, st *Stage, s shape, base, staging, ref []byte, runs int) {
	t.Helper()
	var got []byte
	c := s.t.Cursor()
	var iov [3]unix.Iovec
	for {
		k, n, err := c.FillStagedIovec(st, base, staging, iov[:], 7)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		for _, v := range iov[:k] {
			got = append(got, unsafe.Slice(v.Base, v.Len)...)
		}
	}
	if !bytes.Equal(got, ref) {
		t.Fatal("the staged iovecs do not name the packed stream")
	}
	c = s.t.Cursor()
	all := make([]unix.Iovec, s.t.Blocks()+1)
	if k, n, _ := c.FillStagedIovec(st, base, staging, all, s.t.Size()); k != runs || n != s.t.Size() {
		t.Fatalf("one call: %d entries of %d bytes, want %d runs of %d", k, n, runs, s.t.Size())
	}
}

// checkStagedRemote names the layout at made-up addresses and reads each
// entry back from the buffer its address falls in.
func checkStagedRemote(t *testing.T, st *Stage, s shape, base, staging, ref []byte) {
	t.Helper()
	const baseAt, stagingAt = 1 << 20, 1 << 40
	var got []byte
	c := s.t.Cursor()
	var iov [5]unix.RemoteIovec
	for {
		k, n, err := c.FillStagedRemoteIovec(st, baseAt, stagingAt, iov[:], 11)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		for _, v := range iov[:k] {
			if v.Base >= stagingAt {
				got = append(got, staging[v.Base-stagingAt:][:v.Len]...)
			} else {
				got = append(got, base[v.Base-baseAt:][:v.Len]...)
			}
		}
	}
	if !bytes.Equal(got, ref) {
		t.Fatal("the staged remote iovecs do not name the packed stream")
	}
}

// TestStageMillionSmallBlocks: 2^20 blocks of 8 bytes are one run of the
// staging buffer, named by one entry; a Stage reused for them allocates
// nothing, and packing them allocates nothing per block.
func TestStageMillionSmallBlocks(t *testing.T) {
	vec, _ := Vector(1<<20, 8, 16)
	lens, disps := make([]int64, 1<<20), make([]int64, 1<<20)
	for i := range lens {
		lens[i], disps[i] = 8, int64(i)*16
	}
	idx, _ := Indexed(lens, disps)
	for _, typ := range []*Type{vec, idx} {
		var st Stage
		st.Reset(typ, DefaultSmallBlock)
		base, staging := pattern(typ.Extent(), 1), make([]byte, typ.Size())
		var iov [4]unix.Iovec
		allocs := testing.AllocsPerRun(2, func() {
			st.Reset(typ, DefaultSmallBlock)
			st.Pack(staging, base)
			c := typ.Cursor()
			if k, n, _ := c.FillStagedIovec(&st, base, staging, iov[:], typ.Size()); k != 1 || n != typ.Size() {
				t.Fatalf("%v: %d entries of %d bytes, want 1 of %d", typ.kind, k, n, typ.Size())
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations to stage 2^20 blocks, want 0", typ.kind, allocs)
		}
	}
}
