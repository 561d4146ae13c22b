package coll

import "github.com/knemesis/knemesis/nemesis"

// The tag layout. Every message of this package carries a nemesis library
// tag (nemesis.MinLibTag..MaxLibTag: 31 bits, bit 30 set), which the
// application's receives never match, not even with AnyTag:
//
//	bit  30      1: a library tag
//	bits 29..17  the communicator's context id (cid), 0..MaxComms-1
//	bit  16      0: a collective's message, 1: its failure notice
//	bits 15..0   the collective's number on the communicator, mod 65536
//
// A cid is agreed by all the ranks of a new communicator (the lowest one
// free on every rank of its parent), so two communicators that share a
// rank never share a cid; two disjoint ones may, as no message passes
// between them. The collective's number keeps the messages of
// nonblocking collectives outstanding together on one communicator apart
// (at most maxPending at once).
const (
	cidShift   = 17
	noticeBit  = 1 << 16
	seqMask    = 1<<16 - 1
	cidBits    = 13
	MaxComms   = 1 << cidBits // context ids per rank: communicators alive at once
	maxPending = 1 << 15
	cidWords   = MaxComms / 64
)

func collTag(cid int, seq uint32) int {
	return nemesis.MinLibTag | cid<<cidShift | int(seq&seqMask)
}

func noticeTag(cid int, seq uint32) int {
	return collTag(cid, seq) | noticeBit
}
