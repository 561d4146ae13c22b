package nemesis

// Trust: what another rank writes into the segment (a cell's header, a
// fastbox's, a line record's fields, the entries of an aggregate cell, an
// arena descriptor, an LMT control packet, an active message) is read once
// into this process's memory, checked against the protocol's bounds, and
// only that copy is used afterwards: a rank that rewrites a field between
// the check and the use changes nothing this rank does. A value out of
// bounds is a *peerfault.Error naming the rank, the field and, for a
// number, the value and its limit. It fails the requests with that rank
// (distrust), never the endpoint: the other pairs go on. Only a structure
// every sender shares (the receive queue's links, the bell) fails the
// endpoint, since no rank can be blamed for it.

import (
	"errors"

	"github.com/knemesis/knemesis/peerfault"
)

// cellFields is a private copy of a cell's header, next excepted.
type cellFields struct {
	owner, src, kind uint32
	tag              int32
	seq, len         uint32
	total            uint64
}

// load copies c's header, each field read once.
func (c *cellHdr) load() cellFields {
	return cellFields{owner: c.owner, src: c.src, kind: c.kind, tag: c.tag, seq: c.seq, len: c.len, total: c.total}
}

// fboxFields is a private copy of a full fastbox's header.
type fboxFields struct {
	seq   uint32
	tag   int32
	len   uint32
	kind  uint32
	ack   uint32
	total uint64
}

// load copies fb's header, each field read once, after its flag.
func (fb *fboxHdr) load() fboxFields {
	return fboxFields{seq: fb.seq, tag: fb.tag, len: fb.len, kind: fb.kind, ack: fb.ack, total: fb.total}
}

// cellOwner is the rank whose cells hold offset off, a valid cell offset:
// where the cell lies says whose it is, whatever its header claims.
func (s *segment) cellOwner(off uint64) int {
	return int((off - s.cellOff) / (uint64(s.cellsPerProc) * uint64(s.cellSize)))
}

// ownsCell reports whether off, a valid cell offset, lies among rank's
// cells: two multiplications, on every cell's path.
func (s *segment) ownsCell(rank uint32, off uint64) bool {
	per := uint64(s.cellsPerProc) * uint64(s.cellSize)
	return uint64(rank) < uint64(s.nprocs) && off-s.cellOff-uint64(rank)*per < per
}

// distrust fails every request with rank, which wrote what err says, and
// ignores what it sends from now on. It returns nil: Poll goes on with the
// other ranks.
func (ep *Endpoint) distrust(err *peerfault.Error) error {
	if ep.peers[err.Rank].dead == nil {
		ep.stats.Distrusted++
		ep.failPeer(err.Rank, err, true)
	}
	return nil
}

// distrusted reports whether rank was failed for a corrupt value (not for
// its death): its cells go back unread, its boxes stay unread, and its
// receive queue is its own (never reaped).
func (p *peer) distrusted() bool {
	return p.dead != nil && errors.Is(p.dead, ErrCorrupt)
}

// private copies pkt, a packet another rank wrote that a parser will read
// (an LMT's RTS or control packet, an arena descriptor, an active message),
// into this endpoint's scratch buffer: the parser checks and uses the same
// bytes. No handler polls, so one buffer serves them all.
func (ep *Endpoint) private(pkt []byte) []byte {
	if cap(ep.scratch) < len(pkt) {
		ep.scratch = make([]byte, max(len(pkt), ep.seg.payloadSize, ep.seg.fboxPayload))
	}
	b := ep.scratch[:len(pkt)]
	copy(b, pkt) // a header, not payload: not memcopy.Copy, whose calls the probes count
	return b
}
