package datatype

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The wire encoding is one kind byte followed by unsigned LEB128 varints
// (encoding/binary's Uvarint), each in its shortest form:
//
//	contiguous  0x01 size
//	vector      0x02 count blockLen stride
//	indexed     0x03 n  n × (gap length)
//
// where an indexed block's gap is its displacement minus the end of the
// block before (the first block's gap is its displacement). A vector costs
// at most 31 bytes whatever its block count; an indexed type 2 bytes per
// block when blocks and gaps are under 128 bytes, 4 for a 256 KiB block
// after a short gap. Every encoding has exactly one
// form, so Decode(b) re-encodes to b.

// EncodedLen is the length of the wire encoding of t, in O(1): an
// indexed type counts it when it is built.
func (t *Type) EncodedLen() int {
	n := 1
	switch t.kind {
	case kindContiguous:
		n += uvarintLen(t.size)
	case kindVector:
		n += uvarintLen(t.blocks) + uvarintLen(t.blockLen) + uvarintLen(t.stride)
	case kindIndexed:
		n += uvarintLen(t.blocks) + t.encodedBlocks
	}
	return n
}

// AppendEncode appends the wire encoding of t to dst.
func (t *Type) AppendEncode(dst []byte) []byte {
	dst = append(dst, byte(t.kind))
	switch t.kind {
	case kindContiguous:
		dst = binary.AppendUvarint(dst, uint64(t.size))
	case kindVector:
		dst = binary.AppendUvarint(dst, uint64(t.blocks))
		dst = binary.AppendUvarint(dst, uint64(t.blockLen))
		dst = binary.AppendUvarint(dst, uint64(t.stride))
	case kindIndexed:
		dst = binary.AppendUvarint(dst, uint64(t.blocks))
		var end int64
		for i, l := range t.lens {
			dst = binary.AppendUvarint(dst, uint64(t.disps[i]-end))
			dst = binary.AppendUvarint(dst, uint64(l))
			end = t.disps[i] + l
		}
	}
	return dst
}

// Decode parses a wire encoding received from another process. The input
// is untrusted: every field is bounded, sums are checked for overflow, the
// block count is bounded by the input length before anything is allocated,
// and the description's extent must not exceed maxExtent, the length of
// the buffer it will be applied to. The whole input must be consumed.
func Decode(b []byte, maxExtent int64) (*Type, error) {
	t := new(Type)
	if err := DecodeTo(t, b, maxExtent); err != nil {
		return nil, err
	}
	return t, nil
}

// DecodeTo is Decode into a Type the caller owns and reuses: an indexed
// description reuses t's block arrays when they are large enough, so a
// receiver decoding one description per message allocates nothing once
// they have grown. No cursor may be in use on t. On error t describes
// nothing (Size 0) and keeps its arrays.
func DecodeTo(t *Type, b []byte, maxExtent int64) error {
	err := decodeTo(t, b, maxExtent)
	if err != nil {
		*t = Type{kind: kindContiguous, lens: t.lens[:0], disps: t.disps[:0], starts: t.starts[:0]}
	}
	return err
}

func decodeTo(t *Type, b []byte, maxExtent int64) error {
	if len(b) == 0 {
		return errorf(ErrEncoding, "empty input: an encoding starts with a kind byte")
	}
	d := decoder{b: b, off: 1}
	var err error
	switch kind(b[0]) {
	case kindContiguous:
		err = d.contiguous(t)
	case kindVector:
		err = d.vector(t)
	case kindIndexed:
		err = d.indexed(t)
	default:
		return errorf(ErrEncoding, "kind byte %#02x at offset 0: want 0x01 (contiguous), 0x02 (vector) or 0x03 (indexed)", b[0])
	}
	if err != nil {
		return err
	}
	if d.off != len(b) {
		return errorf(ErrEncoding, "%d trailing bytes after the %s description at offset %d", len(b)-d.off, t.kind, d.off)
	}
	if t.extent > maxExtent {
		return &FieldError{Kind: t.kind.String(), Field: "extent", Index: -1, Value: t.extent,
			Reason: fmt.Sprintf("reaches past the %d-byte buffer it describes", maxExtent), Err: ErrEncoding}
	}
	return nil
}

type decoder struct {
	b   []byte
	off int
}

// next reads one shortest-form varint of at most 2^63-1; what and block
// (-1 for none) name it in an error, formatted only then.
func (d *decoder) next(what string, block int) (int64, error) {
	v, n := binary.Uvarint(d.b[d.off:])
	if n > 0 && (n == 1 || d.b[d.off+n-1] != 0) && v <= math.MaxInt64 {
		d.off += n
		return int64(v), nil
	}
	if block >= 0 {
		what = fmt.Sprintf("%s of block %d", what, block)
	}
	switch {
	case n == 0:
		return 0, errorf(ErrEncoding, "input ends in %s at offset %d", what, d.off)
	case n < 0:
		return 0, errorf(ErrEncoding, "%s at offset %d overflows 64 bits", what, d.off)
	case n > 1 && d.b[d.off+n-1] == 0:
		return 0, errorf(ErrEncoding, "%s at offset %d is not in its shortest form", what, d.off)
	}
	return 0, errorf(ErrEncoding, "%s at offset %d is %d, past 2^63-1", what, d.off, v)
}

// wrap marks a description error found while decoding as malformed input too.
func wrap(err error) error { return fmt.Errorf("%w: %w", ErrEncoding, err) }

func (d *decoder) contiguous(t *Type) error {
	size, err := d.next("contiguous size", -1)
	if err != nil {
		return err
	}
	return t.setContiguous(size) // size ≥ 0: cannot fail
}

func (d *decoder) vector(t *Type) error {
	var f [3]int64
	for i, what := range [...]string{"vector count", "vector blockLen", "vector stride"} {
		v, err := d.next(what, -1)
		if err != nil {
			return err
		}
		f[i] = v
	}
	if err := t.setVector(f[0], f[1], f[2]); err != nil {
		return wrap(err)
	}
	return nil
}

func (d *decoder) indexed(t *Type) error {
	at := d.off
	n, err := d.next("indexed block count", -1)
	if err != nil {
		return err
	}
	// Each block takes at least two bytes: a count the input cannot hold is
	// refused before it sizes an allocation.
	if n > int64(len(d.b)-d.off)/2 {
		return errorf(ErrEncoding, "indexed block count %d at offset %d: the %d bytes left hold at most %d blocks",
			n, at, len(d.b)-d.off, (len(d.b)-d.off)/2)
	}
	t.lens, t.disps, t.starts = grow(t.lens, int(n)), grow(t.disps, int(n)), grow(t.starts, int(n)+1)
	var end int64
	for i := range t.lens {
		gap, err := d.next("indexed gap", i)
		if err != nil {
			return err
		}
		l, err := d.next("indexed length", i)
		if err != nil {
			return err
		}
		var ok bool
		if t.disps[i], ok = add(end, gap); ok {
			end, ok = add(t.disps[i], l)
		}
		if !ok {
			return &FieldError{Kind: "indexed", Field: "lengths", Index: i, Value: l,
				Reason: "the block ends past 2^63-1 bytes", Err: ErrEncoding}
		}
		t.lens[i] = l
	}
	if err := t.setIndexed(); err != nil { // gaps ≥ 0 make it valid; checked again
		return wrap(err)
	}
	return nil
}

// grow returns s resliced to n, reallocated only when too short.
func grow(s []int64, n int) []int64 {
	if cap(s) < n {
		return make([]int64, n)
	}
	return s[:n]
}

func uvarintLen(v int64) int {
	n := 1
	for u := uint64(v); u >= 0x80; u >>= 7 {
		n++
	}
	return n
}
