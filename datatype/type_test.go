package datatype

import (
	"errors"
	"math"
	"testing"
)

func TestBadDescriptions(t *testing.T) {
	big := int64(math.MaxInt64)
	for _, tc := range []struct {
		name  string
		make  func() (*Type, error)
		field string
		index int
		value int64
		msg   string
	}{
		{"negative size", func() (*Type, error) { return Contiguous(-1) }, "size", -1, -1,
			"datatype: invalid description: contiguous size = -1: negative: give the length in bytes, 0 or more"},
		{"negative count", func() (*Type, error) { return Vector(-2, 8, 8) }, "count", -1, -2,
			"datatype: invalid description: vector count = -2: negative: give the number of blocks, 0 or more"},
		{"negative block", func() (*Type, error) { return Vector(2, -8, 8) }, "blockLen", -1, -8,
			"datatype: invalid description: vector blockLen = -8: negative: give the block length in bytes"},
		{"empty blocks", func() (*Type, error) { return Vector(5, 0, 8) }, "blockLen", -1, 0,
			"datatype: invalid description: vector blockLen = 0: zero with blocks to walk: describe an empty message as count 0"},
		{"overlapping stride", func() (*Type, error) { return Vector(2, 8, 7) }, "stride", -1, 7,
			"datatype: invalid description: vector stride = 7: smaller than the block length: blocks would overlap; give a stride of at least blockLen"},
		{"extent overflow", func() (*Type, error) { return Vector(3, 8, big/2) }, "stride", -1, big / 2,
			"datatype: invalid description: vector stride = 4611686018427387903: the last block ends past 2^63-1 bytes: fewer blocks or a smaller stride"},
		{"last block overflow", func() (*Type, error) { return Vector(2, 8, big-7) }, "stride", -1, big - 7,
			"datatype: invalid description: vector stride = 9223372036854775800: the last block ends past 2^63-1 bytes: fewer blocks or a smaller stride"},
		{"count mismatch", func() (*Type, error) { return Indexed([]int64{1, 2}, []int64{0}) }, "displacements", -1, 1,
			"datatype: invalid description: indexed displacements = 1: count differs from the number of lengths: give one displacement per block"},
		{"negative length", func() (*Type, error) { return Indexed([]int64{1, -2}, []int64{0, 4}) }, "lengths", 1, -2,
			"datatype: invalid description: indexed lengths[1] = -2: negative: give the block length in bytes"},
		{"negative displacement", func() (*Type, error) { return Indexed([]int64{1}, []int64{-4}) }, "displacements", 0, -4,
			"datatype: invalid description: indexed displacements[0] = -4: negative: blocks lie inside the base buffer, from byte 0"},
		{"overlap", func() (*Type, error) { return Indexed([]int64{8, 8, 8}, []int64{0, 8, 15}) }, "displacements", 2, 15,
			"datatype: invalid description: indexed displacements[2] = 15: before the end of the previous block: blocks must be in increasing address order and disjoint"},
		{"unordered", func() (*Type, error) { return Indexed([]int64{4, 4}, []int64{100, 0}) }, "displacements", 1, 0,
			"datatype: invalid description: indexed displacements[1] = 0: before the end of the previous block: blocks must be in increasing address order and disjoint"},
		{"block overflow", func() (*Type, error) { return Indexed([]int64{4, 9}, []int64{0, big - 8}) }, "lengths", 1, 9,
			"datatype: invalid description: indexed lengths[1] = 9: the block ends past 2^63-1 bytes"},
	} {
		ty, err := tc.make()
		var fe *FieldError
		if ty != nil || !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) {
			t.Errorf("%s: %v, %v; want a *FieldError wrapping ErrInvalid", tc.name, ty, err)
			continue
		}
		if fe.Field != tc.field || fe.Index != tc.index || fe.Value != tc.value || err.Error() != tc.msg {
			t.Errorf("%s: field %s[%d] = %d, %q\nwant %s[%d] = %d, %q", tc.name, fe.Field, fe.Index, fe.Value, err, tc.field, tc.index, tc.value, tc.msg)
		}
	}
}

func TestSizes(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		make                  func() (*Type, error)
		size, extent, nblocks int64
	}{
		{"empty contiguous", func() (*Type, error) { return Contiguous(0) }, 0, 0, 0},
		{"contiguous", func() (*Type, error) { return Contiguous(10) }, 10, 10, 1},
		{"empty vector", func() (*Type, error) { return Vector(0, 0, 0) }, 0, 0, 0},
		{"vector", func() (*Type, error) { return Vector(3, 4, 10) }, 12, 24, 3},
		{"dense vector", func() (*Type, error) { return Vector(3, 4, 4) }, 12, 12, 3},
		{"largest vector", func() (*Type, error) { return Vector(2, 1, math.MaxInt64-1) }, 2, math.MaxInt64, 2},
		{"indexed", func() (*Type, error) { return Indexed([]int64{64, 0, 1 << 18}, []int64{8, 100, 100}) }, 64 + 1<<18, 100 + 1<<18, 3},
	} {
		ty, err := tc.make()
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if ty.Size() != tc.size || ty.Extent() != tc.extent || ty.Blocks() != tc.nblocks {
			t.Errorf("%s: size %d extent %d blocks %d; want %d %d %d", tc.name, ty.Size(), ty.Extent(), ty.Blocks(), tc.size, tc.extent, tc.nblocks)
		}
	}
}

func TestIndexedCopiesItsSlices(t *testing.T) {
	lens, disps := []int64{4, 4}, []int64{0, 10}
	ty, err := Indexed(lens, disps)
	if err != nil {
		t.Fatal(err)
	}
	lens[1], disps[1] = 100, 0
	if off, n := ty.Block(1); off != 10 || n != 4 {
		t.Fatalf("Block(1) = %d, %d after the caller changed its slices; want 10, 4", off, n)
	}
}
