package datatype

import "math"

type kind uint8

// The kinds are also the first byte of the wire encoding: never renumber.
const (
	kindContiguous kind = 1
	kindVector     kind = 2
	kindIndexed    kind = 3
)

func (k kind) String() string {
	switch k {
	case kindContiguous:
		return "contiguous"
	case kindVector:
		return "vector"
	case kindIndexed:
		return "indexed"
	}
	return "unknown"
}

// Type is a validated, immutable description of which bytes of a base
// buffer a message is made of. All lengths, strides and displacements are
// in bytes, from the start of the base buffer: a caller describing
// elements of a base type multiplies by its size (MPI's hvector and
// hindexed, not vector and indexed). Blocks lie in increasing address
// order and do not overlap, so the packed order is the address order and a
// receiver can scatter into them without ambiguity.
//
// A Type is immutable, except when its owner reuses it with DecodeTo, and
// then safe for concurrent use; cursors over it are not shared.
type Type struct {
	kind     kind
	blocks   int64 // number of blocks, zero-length ones included
	blockLen int64 // contiguous and vector
	stride   int64 // vector
	// indexed: lens[i] and disps[i] describe block i; starts[i] is where
	// block i begins in the packed stream and starts[blocks] == size.
	lens, disps, starts []int64
	size                int64 // bytes described
	extent              int64 // end of the last block: the base buffer needs this many bytes
	// indexed: the length of the blocks' encoding (EncodedLen),
	// counted once by setIndexed, since an LMT asks at every message
	// whether a handle holds it.
	encodedBlocks int
}

// Contiguous describes size bytes at the start of the base buffer.
func Contiguous(size int64) (*Type, error) {
	t := new(Type)
	if err := t.setContiguous(size); err != nil {
		return nil, err
	}
	return t, nil
}

// Vector describes count blocks of blockLen bytes, block i starting at
// byte i*stride. The stride is at least the block length (no overlap); an
// empty vector is count 0.
func Vector(count, blockLen, stride int64) (*Type, error) {
	t := new(Type)
	if err := t.setVector(count, blockLen, stride); err != nil {
		return nil, err
	}
	return t, nil
}

// Indexed describes len(lengths) blocks, block i being lengths[i] bytes at
// byte displacements[i]. Displacements are non-negative and increasing:
// each block starts at or after the end of the one before. Zero-length
// blocks are allowed and skipped. The slices are copied.
func Indexed(lengths, displacements []int64) (*Type, error) {
	if len(lengths) != len(displacements) {
		return nil, invalid("indexed", "displacements", -1, int64(len(displacements)),
			"count differs from the number of lengths: give one displacement per block")
	}
	t := &Type{
		lens:   append([]int64(nil), lengths...),
		disps:  append([]int64(nil), displacements...),
		starts: make([]int64, len(lengths)+1),
	}
	if err := t.setIndexed(); err != nil {
		return nil, err
	}
	return t, nil
}

// The setters below fill t in place, keeping its slices for reuse (see
// DecodeTo). setContiguous and setVector leave t unchanged when they fail;
// setIndexed leaves it for its caller to reset.

func (t *Type) setContiguous(size int64) error {
	if size < 0 {
		return invalid("contiguous", "size", -1, size, "negative: give the length in bytes, 0 or more")
	}
	t.kind, t.blocks, t.blockLen, t.stride = kindContiguous, 0, size, 0
	t.size, t.extent = size, size
	if size > 0 {
		t.blocks = 1
	}
	return nil
}

func (t *Type) setVector(count, blockLen, stride int64) error {
	const k = "vector"
	switch {
	case count < 0:
		return invalid(k, "count", -1, count, "negative: give the number of blocks, 0 or more")
	case blockLen < 0:
		return invalid(k, "blockLen", -1, blockLen, "negative: give the block length in bytes")
	case blockLen == 0 && count > 0:
		return invalid(k, "blockLen", -1, blockLen, "zero with blocks to walk: describe an empty message as count 0")
	case stride < blockLen:
		return invalid(k, "stride", -1, stride, "smaller than the block length: blocks would overlap; give a stride of at least blockLen")
	}
	var extent int64
	if count > 0 {
		last, ok := mul(count-1, stride)
		if ok {
			extent, ok = add(last, blockLen)
		}
		if !ok {
			return invalid(k, "stride", -1, stride, "the last block ends past 2^63-1 bytes: fewer blocks or a smaller stride")
		}
	}
	t.kind, t.blocks, t.blockLen, t.stride = kindVector, count, blockLen, stride
	t.size, t.extent = count*blockLen, extent // size ≤ extent since stride ≥ blockLen
	return nil
}

// setIndexed validates t.lens and t.disps, of equal length, and fills
// t.starts, one longer.
func (t *Type) setIndexed() error {
	const k = "indexed"
	var end, size int64
	encoded := 0
	for i, n := range t.lens {
		d := t.disps[i]
		switch {
		case n < 0:
			return invalid(k, "lengths", i, n, "negative: give the block length in bytes")
		case d < 0:
			return invalid(k, "displacements", i, d, "negative: blocks lie inside the base buffer, from byte 0")
		case d < end:
			return invalid(k, "displacements", i, d,
				"before the end of the previous block: blocks must be in increasing address order and disjoint")
		}
		e, ok := add(d, n)
		if !ok {
			return invalid(k, "lengths", i, n, "the block ends past 2^63-1 bytes")
		}
		t.starts[i] = size
		encoded += uvarintLen(d-end) + uvarintLen(n)
		size += n // ≤ e since blocks are disjoint and start at 0 or after
		end = e
	}
	t.starts[len(t.lens)] = size
	t.encodedBlocks = encoded
	t.kind, t.blocks, t.blockLen, t.stride = kindIndexed, int64(len(t.lens)), 0, 0
	t.size, t.extent = size, end
	return nil
}

// Size is the number of bytes the description selects: the packed length.
func (t *Type) Size() int64 { return t.size }

// Extent is the end of the last block: a base buffer must hold at least
// this many bytes.
func (t *Type) Extent() int64 { return t.extent }

// Blocks is the number of blocks, zero-length ones included.
func (t *Type) Blocks() int64 { return t.blocks }

// Block returns the offset in the base buffer and the length of block i,
// 0 ≤ i < Blocks().
func (t *Type) Block(i int64) (off, n int64) {
	switch t.kind {
	case kindIndexed:
		return t.disps[i], t.lens[i]
	case kindVector:
		return i * t.stride, t.blockLen
	}
	return 0, t.blockLen
}

// packedStart is where block i begins in the packed stream.
func (t *Type) packedStart(i int64) int64 {
	if t.kind == kindIndexed {
		return t.starts[i]
	}
	return i * t.blockLen
}

func add(a, b int64) (int64, bool) {
	if a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// mul multiplies non-negative a and b.
func mul(a, b int64) (int64, bool) {
	if a != 0 && b > math.MaxInt64/a {
		return 0, false
	}
	return a * b, true
}
