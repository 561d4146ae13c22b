package nemesis

import (
	"errors"
	"testing"
)

// FuzzAggregateCell hands arbitrary aggregate cells to the receiving code:
// it must deliver what a well-formed prefix holds (messages as unexpected
// ones, active messages held for a handler) and either the whole cell or
// fail its sender with a *peerfault.Error naming it and the field (or
// return ErrNoLMT for a control packet: this endpoint has no LMT), never
// read past the cell, panic, or take a sequence number it was not given.
func FuzzAggregateCell(f *testing.F) {
	good := make([]byte, 2*aggHdrSize+16)
	putAggHdr(good, 0, 1, 8, kindMsg, 8)
	putAggHdr(good[aggHdrSize+8:], 1, 2, 8, kindRTS, 1<<20)
	f.Add(good, uint64(2))
	f.Add(good[:aggHdrSize+8], uint64(1))
	f.Add([]byte{}, uint64(0))
	eps := joinLocal(f, 2, &Options{CellSize: 512, Cells: 4})
	b := eps[1]
	f.Fuzz(func(t *testing.T, pl []byte, count uint64) {
		if len(pl) > b.seg.payloadSize {
			pl = pl[:b.seg.payloadSize]
		}
		p := &b.peers[0]
		p.recvSeq = 1 // as handleCell leaves it for a cell numbered 0
		err := b.arriveAggregate(0, 0, count, pl)
		if err != nil && !errors.Is(err, ErrNoLMT) {
			t.Fatalf("error %v, want ErrNoLMT or none", err)
		}
		failed := p.dead != nil
		if failed {
			wantCorrupt(t, p.dead, 0)
			forgive(b, 0)
		}
		delivered := len(b.amHeld)
		b.amHeld = b.amHeld[:0]
		for u := b.unexp.Front(); u != nil; u = b.unexp.Front() {
			b.unexp.Remove(&u.links)
			b.freeUnexpected(u)
			delivered++
		}
		whole := err == nil && !failed
		if whole && uint64(delivered) != count {
			t.Fatalf("%d messages delivered of a cell of %d", delivered, count)
		}
		if got := p.recvSeq - 1; got > uint32(delivered) || whole && got != uint32(count)-1 {
			t.Fatalf("sequence advanced by %d after %d messages (count %d, err %v, failed %v)", got, delivered, count, err, failed)
		}
	})
}
