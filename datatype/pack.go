package datatype

import (
	"fmt"

	"github.com/knemesis/knemesis/internal/memcopy"
)

// Pack copies the described bytes of src, the base buffer, into dst in
// packed order and returns their count, t.Size(). src must hold
// t.Extent() bytes and dst t.Size(). Each block is one memcopy.Copy, the
// copy the eBPF probes count.
func (t *Type) Pack(dst, src []byte) (int64, error) {
	if int64(len(dst)) < t.size {
		return 0, errorf(ErrShortBuffer, "pack into %d bytes, the description selects %d", len(dst), t.size)
	}
	c := t.Cursor()
	n, err := c.Pack(dst[:t.size], src)
	return int64(n), err
}

// Unpack scatters the packed bytes of src into dst, the base buffer, and
// returns their count, t.Size(). dst must hold t.Extent() bytes and src
// t.Size(); bytes of dst outside the blocks are left alone.
func (t *Type) Unpack(dst, src []byte) (int64, error) {
	if int64(len(src)) < t.size {
		return 0, errorf(ErrShortBuffer, "unpack from %d bytes, the description selects %d", len(src), t.size)
	}
	c := t.Cursor()
	n, err := c.Unpack(dst, src[:t.size])
	return int64(n), err
}

// Pack copies the stream's next bytes from src, the base buffer, into
// packed, until packed is full or the stream ends, and returns the count:
// one chunk of a chunked transfer.
func (c *Cursor) Pack(packed, src []byte) (int, error) {
	if int64(len(src)) < c.t.extent {
		return 0, errorf(ErrShortBuffer, "base buffer of %d bytes, the description reaches byte %d", len(src), c.t.extent)
	}
	done := 0
	for done < len(packed) {
		off, n := c.Next(int64(len(packed) - done))
		if n == 0 {
			break
		}
		done += memcopy.Copy(packed[done:done+int(n)], src[off:off+n])
	}
	return done, nil
}

// Unpack copies packed, the stream's next bytes, into their blocks of dst,
// the base buffer, and returns the count: less than len(packed) only when
// the stream ends first.
func (c *Cursor) Unpack(dst, packed []byte) (int, error) {
	if int64(len(dst)) < c.t.extent {
		return 0, errorf(ErrShortBuffer, "base buffer of %d bytes, the description reaches byte %d", len(dst), c.t.extent)
	}
	done := 0
	for done < len(packed) {
		off, n := c.Next(int64(len(packed) - done))
		if n == 0 {
			break
		}
		done += memcopy.Copy(dst[off:off+n], packed[done:done+int(n)])
	}
	return done, nil
}

// Fits reports whether buf can be t's base buffer: nil, or a
// [*FieldError] naming the extent, wrapping ErrShortBuffer.
func (t *Type) Fits(buf []byte) error {
	if int64(len(buf)) >= t.extent {
		return nil
	}
	return &FieldError{Kind: t.kind.String(), Field: "extent", Index: -1, Value: t.extent,
		Reason: fmt.Sprintf("reaches past the %d-byte base buffer; give a buffer of at least %d bytes", len(buf), t.extent),
		Err:    ErrShortBuffer}
}
