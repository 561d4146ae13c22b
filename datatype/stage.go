package datatype

import (
	"github.com/knemesis/knemesis/internal/memcopy"
)

// DefaultSmallBlock is the block length under which a transfer packs a
// block rather than naming it to the copy mechanism: a 4 KiB page.
// process_vm_readv and process_vm_writev look up and pin the pages of
// every entry of the remote iovec list and walk the local one entry by
// entry, so a block shorter than a page pays a whole page's lookup for
// less than a page of copy, while packing it costs one user-space copy of
// its own bytes. From a page up, the per-entry cost is spread over at
// least a page of copy and the block is moved in place. This is the rule
// of Aumage, Brunet, Furmento and Namyst, "NewMadeleine: a fast
// communication scheduling engine for high performance networks" (CAC
// 2007, §5.3): a block whose copy costs less than its own communication
// operation is aggregated, the others go zero-copy to their final place.
const DefaultSmallBlock = 4096

// Stage lays the stream of a Type over two buffers: its [Small] blocks,
// shorter than a threshold, packed in stream order into a staging buffer
// of [Stage.Bytes] bytes, and its [Large] blocks left in place in the base
// buffer. Runs of small blocks then become one contiguous piece of the
// staging buffer, which a cursor names in one iovec entry
// ([Cursor.FillStagedIovec], [Cursor.FillStagedRemoteIovec]).
//
// A sender packs its small blocks into the staging buffer before anything
// reads it ([Stage.Pack]); a receiver scatters them once all is in
// ([Stage.Unpack]). The zero Stage stages nothing; Reset reuses its
// storage, so a pooled Stage allocates nothing in the steady state.
type Stage struct {
	t         *Type
	threshold int64
	// before[i] is the number of small bytes before block i of an
	// indexed type; before[blocks] is their total. Vectors need none:
	// their blocks are all of one class.
	before []int64
	bytes  int64
}

// Reset makes s the staging of t's blocks shorter than threshold (none
// below 1), reusing s's storage: O(blocks) for an indexed type, O(1)
// otherwise. A nil t empties s and lets go of the previous Type.
func (s *Stage) Reset(t *Type, threshold int64) {
	s.t, s.threshold, s.bytes = t, threshold, 0
	s.before = s.before[:0]
	switch {
	case t == nil:
	case t.kind == kindIndexed:
		if cap(s.before) < len(t.lens)+1 {
			s.before = make([]int64, 0, len(t.lens)+1)
		}
		for _, l := range t.lens {
			s.before = append(s.before, s.bytes)
			if l < threshold {
				s.bytes += l
			}
		}
		s.before = append(s.before, s.bytes)
	case t.blockLen < threshold:
		s.bytes = t.size
	}
}

// Bytes is the length of the staging buffer: the bytes of the small blocks.
func (s *Stage) Bytes() int64 { return s.bytes }

// Threshold is the block length from which blocks stay in place.
func (s *Stage) Threshold() int64 { return s.threshold }

// small reports whether a block of n bytes is staged.
func (s *Stage) small(n int64) bool { return n < s.threshold }

// start is where small block i begins in the staging buffer.
func (s *Stage) start(i int64) int64 {
	if s.t.kind == kindIndexed {
		return s.before[i]
	}
	return i * s.t.blockLen
}

// Pack copies the small blocks of base, the base buffer, into staging, in
// stream order, and returns their byte count, Bytes(): one memcopy.Copy a
// block, as [Type.Pack].
func (s *Stage) Pack(staging, base []byte) (int64, error) {
	if err := s.check(base, staging); err != nil {
		return 0, err
	}
	return s.copy(base, staging, s.t.size, true), nil
}

// Unpack scatters staging into the small blocks of base that lie in the
// stream's first limit bytes, and returns the bytes copied: a receiver
// that took fewer bytes than the description holds scatters only those.
func (s *Stage) Unpack(base, staging []byte, limit int64) (int64, error) {
	if err := s.check(base, staging); err != nil {
		return 0, err
	}
	return s.copy(base, staging, limit, false), nil
}

func (s *Stage) check(base, staging []byte) error {
	if int64(len(base)) < s.t.extent {
		return errorf(ErrShortBuffer, "base buffer of %d bytes, the description reaches byte %d", len(base), s.t.extent)
	}
	if int64(len(staging)) < s.bytes {
		return errorf(ErrShortBuffer, "staging buffer of %d bytes, the small blocks hold %d", len(staging), s.bytes)
	}
	return nil
}

// copy moves the small blocks within the stream's first limit bytes
// between base and staging: out of base when pack, into it otherwise.
func (s *Stage) copy(base, staging []byte, limit int64, pack bool) int64 {
	if s.bytes == 0 {
		return 0
	}
	t := s.t
	var pos, done int64
	for i := int64(0); i < t.blocks && pos < limit; i++ {
		off, n := t.Block(i)
		if s.small(n) {
			k := min(n, limit-pos)
			at := s.start(i)
			if pack {
				memcopy.Copy(staging[at:at+k], base[off:off+k])
			} else {
				memcopy.Copy(base[off:off+k], staging[at:at+k])
			}
			done += k
		}
		pos += n
	}
	return done
}

// NextStaged is [Cursor.Next] over s's layout of the cursor's Type:
// staged reports that the piece lies in the staging buffer, off then
// counting from its start, else in the base buffer. The cursor must walk
// all of its Type's blocks (from [Type.Cursor]), the Type s was Reset to.
func (c *Cursor) NextStaged(s *Stage, budget int64) (staged bool, off, n int64) {
	if s != nil && s.bytes == c.t.size && c.pos < c.t.size && budget > 0 {
		// Every block is staged: the stream is the staging buffer, one
		// piece whatever the block count.
		off, n = c.pos, min(budget, c.t.size-c.pos)
		_ = c.SetPos(off + n) // within the stream
		return true, off, n
	}
	off, n = c.Next(budget)
	if n == 0 || s == nil {
		return false, off, n
	}
	if _, blen := c.t.Block(c.block); s.small(blen) {
		return true, s.start(c.block) + c.off - n, n
	}
	return false, off, n
}
