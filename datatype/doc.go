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
// # Small and large blocks
//
// Aumage, Brunet, Furmento and Namyst, "NewMadeleine: a fast communication
// scheduling engine for high performance networks" (CAC 2007, §5.3), send
// an indexed type of 64-byte and 256 KiB blocks about 70% faster than
// MPICH, which packs it, by aggregating the small blocks into one packet
// with the rendezvous requests of the large ones and moving the large
// blocks zero-copy to their final place: a block whose copy costs less
// than its own communication operation is packed, the others are not.
// [Type.Classify] counts the two classes under a length threshold and
// [Type.Select] gives a cursor over one. A [Stage] lays a description out
// for a copy mechanism that way: its small blocks packed, in stream
// order, into a staging buffer, its large ones left in place, and
// [Cursor.FillStagedIovec] and [Cursor.FillStagedRemoteIovec] name the
// stream over both, a run of small blocks as one entry of the staging
// buffer. [DefaultSmallBlock], a page, is the threshold for
// process_vm_readv and process_vm_writev, and says why.
//
// # How the LMT uses it
//
// This package depends on neither lmt nor nemesis; lmt.Engine's
// StartSendType and StartRecvType take a base buffer and a Type on either
// side (the other may be a plain iovec list). On the CMA backends (cma,
// cma-write, cma-split, multirail) no whole message is packed: the handle
// carries the compact encoding with the base address instead of one
// 16-byte entry per segment, so the 64-segment limit of the segment
// handle does not apply (a vector of 2^20 blocks travels in 30 bytes, an
// indexed type in 2 to 4 bytes a block, which must fit the RTS or CTS);
// the peer decodes it with DecodeTo into storage its pooled transfer
// keeps, refusing a malformed one as an lmt.CorruptError that wraps
// ErrEncoding before anything is copied; and each process_vm_readv or
// process_vm_writev takes its two iovec lists from FillStagedIovec and
// FillStagedRemoteIovec, IOV_MAX entries at a time, resuming by SetPos.
//
// Each side stages its own blocks shorter than lmt.Config.SmallBlock
// (default DefaultSmallBlock): a sender packs them before its RTS, its
// handle names the staging buffer and the threshold beside the base
// address, so that the peer classifies the blocks as their owner did, and
// a receiver scatters its staging buffer once the message is all in (only
// the bytes it took, when the message is shorter than its description).
// process_vm_readv pins the pages of every entry of its remote list and
// walks its local one entry by entry: 2^20 blocks of 8 bytes named one by
// one take 1024 calls of IOV_MAX entries, where staged they are one
// 8 MiB piece, two calls of lmt.Config.CMAChunk. Large blocks keep moving
// in place, with no copy beside the kernel's. Unlike NewMadeleine, the
// stream is not reordered: a small block between two large ones stays
// its own entry (of the staging buffer), which costs one entry beside
// the large blocks' copy. A message allocates nothing per block; a pooled
// transfer keeps its staging buffer. The other backends (knem, the
// arenas, the streams) do not take a typed transfer: the engine chooses a
// CMA one, or says none fits.
package datatype
