package datatype

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestClassesPartitionTheBlocks: the small and large cursors pack exactly
// the reference blocks of their class, Classify counts them, and a
// receiver that unpacks both streams rebuilds every block.
func TestClassesPartitionTheBlocks(t *testing.T) {
	eachShape(t, 150, func(t *testing.T, s shape, r *rand.Rand) {
		threshold := r.Int64N(40)
		src := pattern(s.extent(), 0x0f)
		var small, large []byte
		var want Partition
		for _, b := range s.blocks {
			switch {
			case b.n == 0:
			case b.n < threshold:
				small = append(small, src[b.off:b.off+b.n]...)
				want.SmallBlocks++
				want.SmallBytes += b.n
			default:
				large = append(large, src[b.off:b.off+b.n]...)
				want.LargeBlocks++
				want.LargeBytes += b.n
			}
		}
		if got := s.t.Classify(threshold); got != want {
			t.Fatalf("Classify(%d) = %+v, want %+v", threshold, got, want)
		}
		dst := make([]byte, len(src))
		for _, part := range []struct {
			class Class
			want  []byte
		}{{Small, small}, {Large, large}} {
			c := s.t.Select(part.class, threshold)
			got := make([]byte, len(part.want)+1)
			n, err := c.Pack(got, src)
			if err != nil || !bytes.Equal(got[:n], part.want) {
				t.Fatalf("%v (threshold %d): packed %d bytes, %v; differ from the reference", part.class, threshold, n, err)
			}
			if len(part.want) > 0 {
				pos := r.Int64N(int64(len(part.want)))
				c := s.t.Select(part.class, threshold)
				if err := c.SetPos(pos); err != nil {
					t.Fatal(err)
				}
				n, _ := c.Pack(got, src)
				if !bytes.Equal(got[:n], part.want[pos:]) {
					t.Fatalf("%v from %d differs from the reference tail", part.class, pos)
				}
			}
			u := s.t.Select(part.class, threshold)
			if n, err := u.Unpack(dst, part.want); err != nil || n != len(part.want) {
				t.Fatalf("%v unpack = %d, %v", part.class, n, err)
			}
		}
		if !bytes.Equal(refPack(s, dst), refPack(s, src)) {
			t.Fatalf("small and large streams unpacked do not rebuild the blocks")
		}
	})
}

func TestSelectRefusesOtherClasses(t *testing.T) {
	ty, _ := Contiguous(1)
	defer func() {
		if r := recover(); r != "datatype: Select of Class(0): want Small or Large" {
			t.Fatalf("recovered %v", r)
		}
	}()
	ty.Select(0, 1)
}
