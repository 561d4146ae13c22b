// Package datatype describes noncontiguous messages, MPI's derived
// datatypes, once, so that they can be walked, sent and scattered without
// listing every block.
//
// # Descriptions
//
// A [Type] says which bytes of a base buffer make up a message:
// [Contiguous], [Vector] (count blocks of blockLen bytes, stride bytes
// apart) or [Indexed] (one length and displacement per block). Every
// quantity is in bytes from the start of the base buffer, as MPI's hvector
// and hindexed; a caller counting elements multiplies by their size.
// Blocks lie in increasing address order and never overlap, so the packed
// order is the address order and a receiver scatters into them without
// ambiguity; MPI's negative displacements, unordered blocks and nested
// (struct) types are not described. Constructors validate: a bad field
// comes back as a [*FieldError] naming it, wrapping [ErrInvalid], and no
// length, end or extent can overflow int64. A Type is immutable (but for
// its owner's reuse through [DecodeTo]) and safe for concurrent use.
//
// # Walking
//
// A [Cursor] walks the blocks lazily as (offset, length) pieces, splits
// them at any byte budget, and fills caller-provided batches of
// unix.Iovec (a local buffer) or unix.RemoteIovec (another process's
// buffer, for process_vm_readv and process_vm_writev), merging pieces
// that touch. Its position is a byte offset in the packed stream: a
// chunked transfer stops anywhere, mid-block included, and resumes by
// keeping the cursor (a plain value) or by [Cursor.SetPos], which costs
// O(log blocks). Walking allocates nothing per block, whatever the count.
// [Type.Pack] and [Type.Unpack], and their chunked forms on a cursor, copy
// one block at a time through internal/memcopy.Copy, the one user-space
// copy the eBPF probes count.
//
// # Wire encoding
//
// [Type.AppendEncode] writes a description in a few bytes (a vector in at
// most 31, an indexed type in 2-4 bytes per block for the shapes that
// matter) and [Decode] reads it back from untrusted input: every field is
// bounded, sums are checked, nothing is allocated beyond what the input
// can hold, the extent must fit the receiver's buffer, and each
// description has exactly one encoding. Errors wrap [ErrEncoding].
// [DecodeTo] reuses a Type's arrays, so a receiver decoding one
// description per message allocates nothing in the steady state.
//
// [Type.Classify] and [Type.Select] split a description into blocks
// shorter than a threshold and the others; a [Stage] packs the short ones
// into a staging buffer and leaves the long ones in place, so that a copy
// mechanism moves both in one iovec list ([DefaultSmallBlock] says why a
// page).
//
// This package depends on neither lmt nor nemesis. docs/design/datatype.md
// tells how the LMT's CMA backends carry a description and stage its
// small blocks, and why.
package datatype
