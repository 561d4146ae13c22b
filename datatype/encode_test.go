package datatype

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestEncodingRoundTrip(t *testing.T) {
	eachShape(t, 150, func(t *testing.T, s shape, _ *rand.Rand) {
		enc := s.t.AppendEncode([]byte{0xaa})[1:]
		if len(enc) != s.t.EncodedLen() {
			t.Fatalf("encoding is %d bytes, EncodedLen says %d", len(enc), s.t.EncodedLen())
		}
		got, err := Decode(enc, s.extent())
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if got.Size() != s.t.Size() || got.Extent() != s.t.Extent() || got.Blocks() != s.t.Blocks() {
			t.Fatalf("decoded size/extent/blocks %d/%d/%d, want %d/%d/%d",
				got.Size(), got.Extent(), got.Blocks(), s.t.Size(), s.t.Extent(), s.t.Blocks())
		}
		for i, b := range s.blocks {
			if off, n := got.Block(int64(i)); off != b.off || n != b.n {
				t.Fatalf("decoded block %d = %d+%d, want %d+%d", i, off, n, b.off, b.n)
			}
		}
	})
}

// TestEncodingIsCompact: the description, not one entry per block, is
// what travels: a vector is a few bytes whatever its count, and the
// indexed shape of the NewMadeleine benchmark 2 bytes per 64 B block and 4
// per 256 KiB block, against 16 per segment in today's CMA handle.
func TestEncodingIsCompact(t *testing.T) {
	v, _ := Vector(1<<40, 8, 64)
	if got, want := v.AppendEncode(nil), []byte{2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 8, 64}; !bytes.Equal(got, want) {
		t.Errorf("vector encoding % x, want % x", got, want)
	}
	ix := benchIndexed(t, 1000)
	if got := ix.EncodedLen(); got != 1+2+500*(1+1)+500*(1+3) {
		t.Errorf("1,000-block indexed encoding is %d bytes, want %d", got, 1+2+500*(1+1)+500*(1+3))
	}
}

func TestDecodeRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        []byte
		maxExtent int64
		invalid   bool // also wraps ErrInvalid
		msg       string
	}{
		{"empty", nil, 100, false, "datatype: malformed encoding: empty input: an encoding starts with a kind byte"},
		{"kind", []byte{9, 1}, 100, false, "datatype: malformed encoding: kind byte 0x09 at offset 0: want 0x01 (contiguous), 0x02 (vector) or 0x03 (indexed)"},
		{"truncated", []byte{2, 4, 8}, 100, false, "datatype: malformed encoding: input ends in vector stride at offset 3"},
		{"truncated varint", []byte{1, 0x80}, 100, false, "datatype: malformed encoding: input ends in contiguous size at offset 1"},
		{"64-bit overflow", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 100, false,
			"datatype: malformed encoding: contiguous size at offset 1 overflows 64 bits"},
		{"past 2^63-1", []byte{1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 100, false,
			"datatype: malformed encoding: contiguous size at offset 1 is 9223372036854775808, past 2^63-1"},
		{"not shortest", []byte{1, 0x85, 0x00}, 100, false, "datatype: malformed encoding: contiguous size at offset 1 is not in its shortest form"},
		{"trailing", []byte{1, 5, 0}, 100, false, "datatype: malformed encoding: 1 trailing bytes after the contiguous description at offset 2"},
		{"extent", []byte{2, 3, 4, 10}, 23, false, "datatype: malformed encoding: vector extent = 24: reaches past the 23-byte buffer it describes"},
		{"overlap", []byte{2, 3, 4, 3}, 100, true,
			"datatype: malformed encoding: datatype: invalid description: vector stride = 3: smaller than the block length: blocks would overlap; give a stride of at least blockLen"},
		{"vector overflow", []byte{2, 3, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, math.MaxInt64, true,
			"datatype: malformed encoding: datatype: invalid description: vector stride = 9223372036854775807: the last block ends past 2^63-1 bytes: fewer blocks or a smaller stride"},
		{"block count", []byte{3, 3, 0, 1, 0, 1, 0}, 100, false,
			"datatype: malformed encoding: indexed block count 3 at offset 1: the 5 bytes left hold at most 2 blocks"},
		{"huge block count", []byte{3, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 1}, 100, false,
			"datatype: malformed encoding: indexed block count 4294967295 at offset 1: the 2 bytes left hold at most 1 blocks"},
		{"indexed truncated", []byte{3, 2, 0x80, 0x01, 1, 0}, 200, false, "datatype: malformed encoding: input ends in indexed length of block 1 at offset 6"},
		{"indexed sum", []byte{3, 2, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 1}, math.MaxInt64, false,
			"datatype: malformed encoding: indexed lengths[1] = 1: the block ends past 2^63-1 bytes"},
		{"indexed extent", []byte{3, 2, 0, 1, 5, 2}, 7, false, "datatype: malformed encoding: indexed extent = 8: reaches past the 7-byte buffer it describes"},
	} {
		ty, err := Decode(tc.in, tc.maxExtent)
		if ty != nil || !errors.Is(err, ErrEncoding) || errors.Is(err, ErrInvalid) != tc.invalid || err.Error() != tc.msg {
			t.Errorf("%s: %v, %v\nwant %q (ErrInvalid too: %v)", tc.name, ty, err, tc.msg, tc.invalid)
		}
	}
}

func TestDecodeToReusesWithoutAllocation(t *testing.T) {
	big := benchIndexed(t, 1000).AppendEncode(nil)
	small, _ := Indexed([]int64{3, 5}, []int64{1, 10})
	vec, _ := Vector(4, 2, 3)
	encs := [][]byte{big, small.AppendEncode(nil), vec.AppendEncode(nil), {2, 3, 4, 3}}
	var ty Type
	var errs int
	allocs := testing.AllocsPerRun(10, func() {
		errs = 0
		for _, enc := range encs[:3] {
			if DecodeTo(&ty, enc, 1<<30) != nil {
				errs++
			}
		}
	})
	if allocs != 0 || errs != 0 {
		t.Fatalf("DecodeTo into a reused Type: %v allocations, %d errors; want 0, 0", allocs, errs)
	}
	// A smaller indexed type into the grown arrays, then an error.
	if err := DecodeTo(&ty, encs[1], 100); err != nil || ty.Blocks() != 2 || ty.Size() != 8 || ty.Extent() != 15 {
		t.Fatalf("DecodeTo = %v: %d blocks, size %d, extent %d; want 2, 8, 15", err, ty.Blocks(), ty.Size(), ty.Extent())
	}
	if off, n := ty.Block(1); off != 10 || n != 5 {
		t.Fatalf("Block(1) = %d+%d, want 10+5", off, n)
	}
	if err := DecodeTo(&ty, encs[3], 100); !errors.Is(err, ErrInvalid) || ty.Size() != 0 || ty.Blocks() != 0 || ty.Extent() != 0 {
		t.Fatalf("DecodeTo(bad) = %v, size %d blocks %d extent %d; want ErrInvalid and an empty type", err, ty.Size(), ty.Blocks(), ty.Extent())
	}
}

// FuzzDecode feeds untrusted encodings to Decode. What decodes must
// re-encode to the same bytes, fit the limit, and walk, pack and unpack
// without going past its buffers. The seed corpus runs under go test.
func FuzzDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 2007))
	for range 30 {
		f.Add(randomShape(f, r).t.AppendEncode(nil))
	}
	for _, seed := range [][]byte{
		{}, {0}, {1, 0}, {2, 0, 0, 0}, {2, 3, 4, 3}, {3, 0}, {3, 2, 0, 1, 5, 2},
		{3, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 1}, {1, 0x85, 0x00}, {2, 3, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	} {
		f.Add(seed)
	}
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, in []byte) {
		ty, err := Decode(in, limit)
		if err != nil {
			if ty != nil || !errors.Is(err, ErrEncoding) {
				t.Fatalf("Decode = %v, %v: an error must wrap ErrEncoding and return no type", ty, err)
			}
			return
		}
		// The same decoded into a Type whose arrays hold another description.
		reused, _ := Indexed([]int64{1, 2, 3, 4, 5, 6, 7}, []int64{0, 9, 20, 30, 40, 50, 60})
		if err := DecodeTo(reused, in, limit); err != nil || !bytes.Equal(reused.AppendEncode(nil), in) || reused.Size() != ty.Size() {
			t.Fatalf("DecodeTo into a used Type = %v, re-encoded % x", err, reused.AppendEncode(nil))
		}
		if enc := ty.AppendEncode(nil); !bytes.Equal(enc, in) || ty.EncodedLen() != len(in) {
			t.Fatalf("re-encoded % x (EncodedLen %d) from % x", enc, ty.EncodedLen(), in)
		}
		if ty.Extent() > limit || ty.Size() > ty.Extent() {
			t.Fatalf("size %d extent %d past the %d limit", ty.Size(), ty.Extent(), limit)
		}
		base := pattern(ty.Extent(), 1)
		packed := make([]byte, ty.Size())
		if n, err := ty.Pack(packed, base); err != nil || n != ty.Size() {
			t.Fatalf("Pack = %d, %v", n, err)
		}
		if n, err := ty.Unpack(make([]byte, ty.Extent()), packed); err != nil || n != ty.Size() {
			t.Fatalf("Unpack = %d, %v", n, err)
		}
	})
}
