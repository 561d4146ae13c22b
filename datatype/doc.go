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
// blocks zero-copy to their final place. [Type.Classify] counts the two
// classes under a length threshold and [Type.Select] gives a cursor over
// one: pack the [Small] stream, walk the [Large] one into iovecs.
//
// # How the LMT uses it
//
// This package depends on neither lmt nor nemesis; lmt.Engine's
// StartSendType and StartRecvType take a base buffer and a Type on either
// side (the other may be a plain iovec list). On the CMA backends (cma,
// cma-write, cma-split, multirail) nothing is packed: the handle carries
// the compact encoding with the base address instead of one 16-byte
// entry per segment, so the 64-segment limit of the segment handle does
// not apply (a vector of 2^20 blocks travels in 30 bytes, an indexed type
// in 2 to 4 bytes a block, which must fit the RTS or CTS); the peer
// decodes it with DecodeTo into storage its pooled transfer keeps, refusing
// a malformed one as an lmt.CorruptError that wraps ErrEncoding before
// anything is copied; and each process_vm_readv or process_vm_writev takes
// its two iovec lists from FillIovec and FillRemoteIovec, IOV_MAX entries
// at a time, resuming by SetPos. A message then allocates nothing per
// block. The other backends (knem, the arenas, the streams) do not take a
// typed transfer: the engine chooses a CMA one, or says none fits.
//
// Not built yet: the small-block aggregation of §5.3. process_vm_readv
// pins a page for every block of its remote list and the copy loop walks
// every local one, so blocks of a few bytes cost more through the
// mechanism than packing them does (cma's BenchmarkTypedVsPack measures
// both in one run); the small blocks should be packed into the eager
// packet and only the large ones moved in place.
package datatype
