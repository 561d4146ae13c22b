package datatype

import (
	"math"

	"golang.org/x/sys/unix"
)

// Cursor walks the blocks of a Type lazily, in address order, as
// (offset in the base buffer, length) pieces, and remembers its position
// in the packed stream so that a chunked transfer can stop anywhere,
// mid-block included, and go on later. A cursor from [Type.Select] walks
// only the blocks of one [Class] and its positions count only their bytes.
//
// A Cursor is a small value: copying it saves a position. It allocates
// nothing, whatever the number of blocks. The zero Cursor is not usable:
// get one from [Type.Cursor] or [Type.Select].
type Cursor struct {
	t     *Type
	block int64 // current block
	off   int64 // bytes of it already walked
	pos   int64 // bytes walked since the start of the stream
	sel   selection
}

// Cursor returns a cursor at the start of all of t's bytes.
func (t *Type) Cursor() Cursor { return Cursor{t: t} }

// Pos is the number of bytes walked: the position in the packed stream.
func (c *Cursor) Pos() int64 { return c.pos }

// SetPos moves the cursor to byte pos of its stream, 0 ≤ pos ≤ the
// stream's length: O(log blocks) over all blocks, O(blocks) over a class.
// Out of range, it returns an error wrapping ErrRange and leaves the
// cursor where it was.
func (c *Cursor) SetPos(pos int64) error {
	if c.sel.all() {
		if pos < 0 || pos > c.t.size {
			return errorf(ErrRange, "position %d in a %d-byte stream", pos, c.t.size)
		}
		c.block = c.t.blockAt(pos)
		c.off = pos - c.t.packedStart(c.block)
		c.pos = pos
		return nil
	}
	if pos < 0 {
		return errorf(ErrRange, "position %d", pos)
	}
	was := *c
	*c = Cursor{t: c.t, sel: c.sel}
	for c.pos < pos {
		if _, n := c.Next(pos - c.pos); n == 0 {
			err := errorf(ErrRange, "position %d in a %d-byte %s stream", pos, c.pos, c.sel)
			*c = was
			return err
		}
	}
	return nil
}

// blockAt returns the block holding packed byte pos, or t.blocks at the end.
func (t *Type) blockAt(pos int64) int64 {
	switch {
	case pos >= t.size:
		return t.blocks
	case t.kind != kindIndexed:
		return pos / t.blockLen // blockLen > 0 when size > 0
	}
	// First block whose end in the packed stream is past pos.
	lo, hi := int64(0), t.blocks
	for lo < hi {
		mid := int64(uint64(lo+hi) >> 1)
		if t.starts[mid+1] > pos {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// Next returns the next piece, at most budget bytes: its offset in the
// base buffer and its length. A piece ends at the end of a block or of the
// budget, whichever comes first. n is 0 at the end of the stream or with a
// budget of 0.
func (c *Cursor) Next(budget int64) (off, n int64) {
	t := c.t
	for budget > 0 && c.block < t.blocks {
		boff, blen := t.Block(c.block)
		if c.off >= blen || !c.sel.takes(blen) {
			c.block++
			c.off = 0
			continue
		}
		n = min(blen-c.off, budget)
		off = boff + c.off
		c.off += n
		c.pos += n
		return off, n
	}
	return 0, 0
}

// FillIovec fills iov with the next pieces of buf, the base buffer, up to
// budget bytes, merging pieces that touch; it returns the number of
// entries filled and of bytes they cover. buf must hold t.Extent() bytes.
func (c *Cursor) FillIovec(buf []byte, iov []unix.Iovec, budget int64) (entries int, bytes int64, err error) {
	return c.FillStagedIovec(nil, buf, nil, iov, budget)
}

// FillStagedIovec is FillIovec over s's layout: the pieces of small
// blocks come from staging, in which runs of them touch and merge into
// one entry; those of large blocks from base. A nil s stages nothing.
func (c *Cursor) FillStagedIovec(s *Stage, base, staging []byte, iov []unix.Iovec, budget int64) (entries int, bytes int64, err error) {
	if int64(len(base)) < c.t.extent {
		return 0, 0, errorf(ErrShortBuffer, "base buffer of %d bytes, the description reaches byte %d", len(base), c.t.extent)
	}
	if s != nil && int64(len(staging)) < s.bytes {
		return 0, 0, errorf(ErrShortBuffer, "staging buffer of %d bytes, the small blocks hold %d", len(staging), s.bytes)
	}
	var end int64 = -1
	var endStaged bool
	for entries < len(iov) || end >= 0 {
		save := *c
		staged, off, n := c.NextStaged(s, budget-bytes)
		if n == 0 {
			break
		}
		if off == end && staged == endStaged {
			iov[entries-1].Len += uint64(n)
		} else if entries == len(iov) {
			*c = save
			break
		} else {
			buf := base
			if staged {
				buf = staging
			}
			iov[entries] = unix.Iovec{Base: &buf[off]}
			iov[entries].SetLen(int(n))
			entries++
		}
		end, endStaged = off+n, staged
		bytes += n
	}
	return entries, bytes, nil
}

// FillRemoteIovec does what FillIovec does for a buffer at address base in
// another process, for process_vm_readv and process_vm_writev (the kernel
// checks the addresses).
func (c *Cursor) FillRemoteIovec(base uintptr, iov []unix.RemoteIovec, budget int64) (entries int, bytes int64, err error) {
	return c.FillStagedRemoteIovec(nil, base, 0, iov, budget)
}

// FillStagedRemoteIovec is FillRemoteIovec over s's layout in another
// process: small blocks in its staging buffer at address staging, large
// ones in its base buffer at base. A nil s stages nothing.
func (c *Cursor) FillStagedRemoteIovec(s *Stage, base, staging uintptr, iov []unix.RemoteIovec, budget int64) (entries int, bytes int64, err error) {
	if uint64(c.t.extent) > uint64(math.MaxUint64-uint64(base)) {
		return 0, 0, errorf(ErrShortBuffer, "a buffer at %#x cannot hold %d bytes", base, c.t.extent)
	}
	if s != nil && uint64(s.bytes) > uint64(math.MaxUint64-uint64(staging)) {
		return 0, 0, errorf(ErrShortBuffer, "a staging buffer at %#x cannot hold %d bytes", staging, s.bytes)
	}
	var end int64 = -1
	var endStaged bool
	for entries < len(iov) || end >= 0 {
		save := *c
		staged, off, n := c.NextStaged(s, budget-bytes)
		if n == 0 {
			break
		}
		if off == end && staged == endStaged {
			iov[entries-1].Len += int(n)
		} else if entries == len(iov) {
			*c = save
			break
		} else {
			addr := base
			if staged {
				addr = staging
			}
			iov[entries] = unix.RemoteIovec{Base: addr + uintptr(off), Len: int(n)}
			entries++
		}
		end, endStaged = off+n, staged
		bytes += n
	}
	return entries, bytes, nil
}
