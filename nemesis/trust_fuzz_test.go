package nemesis

import (
	"encoding/binary"
	"errors"
	"testing"
)

// The fuzz targets of the parsers of what another rank writes: a fastbox,
// a cell, a line record, an arena descriptor and a network packet (the
// aggregate cell's is FuzzAggregateCell, the segment header's
// FuzzSegmentHeader). Each writes the fuzzer's values where the sender
// would, runs the receiving code, and asserts that it either delivers a
// message or fails the sender, rank 0, with a *peerfault.Error naming it and
// the field, never panics, never reads outside what the sender may write,
// and never fails the endpoint. Their seeds run under plain go test; `make
// fuzz-trust` runs each for a while.

// drainUnexpected frees what the receiving code kept as unexpected and
// returns how many messages it kept, with their lengths.
func drainUnexpected(ep *Endpoint) (n, bytes int) {
	ep.amHeld = ep.amHeld[:0]
	for u := ep.unexp.Front(); u != nil; u = ep.unexp.Front() {
		ep.unexp.Remove(&u.links)
		n, bytes = n+1, bytes+len(u.data)
		ep.freeUnexpected(u)
	}
	return n, bytes
}

// settle checks what a parser left: the endpoint alive, and rank 0 either
// trusted or failed with a *peerfault.Error, which it then forgives.
func settle(t *testing.T, ep *Endpoint, err error) {
	t.Helper()
	if err != nil || ep.fatal != nil {
		t.Fatalf("the endpoint failed: %v (fatal %v); only rank 0 may", err, ep.fatal)
	}
	if d := ep.peers[0].dead; d != nil {
		wantCorrupt(t, d, 0)
		forgive(ep, 0)
	}
	if a := &ep.peers[0].asm; a.ux != nil {
		*a = assembly{} // drainUnexpected frees it
	}
	drainUnexpected(ep)
}

// FuzzFastbox writes a fastbox's header and payload as rank 0 would, for
// rank 1, which polls it.
func FuzzFastbox(f *testing.F) {
	f.Add(uint32(0), int32(1), uint32(5), uint32(kindMsg), uint32(0), uint64(5), []byte("hello"))
	f.Add(uint32(0), int32(1), uint32(5), uint32(kindMsg), uint32(0), uint64(1<<62), []byte("hello"))
	f.Add(uint32(0), int32(1), uint32(1<<31), uint32(kindMsg), uint32(0), uint64(1<<31), []byte{})
	f.Add(uint32(0), int32(2), uint32(16), uint32(kindArena), uint32(0), uint64(1<<40), make([]byte, 16))
	f.Add(uint32(0), int32(2), uint32(3), uint32(kindRTS), uint32(0), uint64(1<<63), []byte("rts"))
	f.Add(uint32(0), int32(0), uint32(4), uint32(kindControl), uint32(0), uint64(0), []byte("ctl!"))
	f.Add(uint32(0), int32(0), uint32(4), uint32(kindAM), uint32(7), uint64(0), []byte("am!!"))
	f.Add(uint32(0), int32(0), uint32(1), uint32(99), uint32(0), uint64(1), []byte("?"))
	eps := joinLocal(f, 2, &Options{CellSize: 512, Cells: 4, FastboxSize: 256})
	b := eps[1]
	f.Fuzz(func(t *testing.T, seq uint32, tag int32, n, kind, ack uint32, total uint64, pl []byte) {
		p := &b.peers[0]
		k := p.recvSeq % fboxSlots
		fb, room := p.fbIn[k], p.fbInPl[k]
		copy(room, pl)
		fb.seq, fb.tag, fb.len, fb.kind, fb.ack, fb.total = p.recvSeq+seq%2, tag, n, kind, ack, total
		fb.full.Store(1)
		ok, err := b.pollFbox(0)
		fb.full.Store(0)
		if ok && p.dead == nil && (kind == kindMsg && n != uint32(total) || n > uint32(len(room))) {
			t.Fatalf("took a fastbox of %d bytes of %d (kind %d, room %d)", n, total, kind, len(room))
		}
		if err != nil && errors.Is(err, ErrCorrupt) {
			t.Fatalf("the endpoint failed: %v", err)
		}
		if p.dead != nil {
			pe := wantCorrupt(t, p.dead, 0)
			if pe.Limit > 0 && pe.Value <= pe.Limit {
				t.Fatalf("%v: a value within its limit", pe)
			}
		}
		settle(t, b, nil)
		p.acked = ack // what a later header must not go back from
		p.sendSeq = max(p.sendSeq, ack)
	})
}

// FuzzCell writes a cell header as rank 0 would into one of its cells,
// enqueues the cell for rank 1, and lets rank 1 take it: the cell must
// come back to rank 0's free queue whatever the header said.
func FuzzCell(f *testing.F) {
	f.Add(uint32(0), uint32(0), uint32(kindMsg), int32(3), uint32(0), uint32(5), uint64(5), []byte("hello"))
	f.Add(uint32(0), uint32(0), uint32(kindMsg), int32(3), uint32(0), uint32(5), uint64(1<<62), []byte("hello"))
	f.Add(uint32(0), uint32(0), uint32(kindMsg), int32(3), uint32(0), uint32(5), uint64(1<<40), []byte("hello"))
	f.Add(uint32(0), uint32(0), uint32(kindCont), int32(0), uint32(0), uint32(5), uint64(0), []byte("world"))
	f.Add(uint32(1), uint32(0), uint32(kindMsg), int32(3), uint32(0), uint32(5), uint64(5), []byte("owner"))
	f.Add(uint32(0), uint32(1), uint32(kindMsg), int32(3), uint32(0), uint32(5), uint64(5), []byte("src"))
	f.Add(uint32(0), uint32(0), uint32(kindAgg), int32(0), uint32(0), uint32(48), uint64(2), make([]byte, 48))
	f.Add(uint32(0), uint32(0), uint32(kindFboxSetup), int32(0), uint32(0), uint32(0), uint64(1<<33), []byte{})
	f.Add(uint32(0), uint32(0), uint32(kindArena), int32(0), uint32(0), uint32(32), uint64(100), make([]byte, 32))
	f.Add(uint32(0), uint32(0), uint32(kindMsg), int32(3), uint32(7), uint32(1<<20), uint64(1<<20), []byte{})
	eps := joinLocal(f, 2, &Options{CellSize: 512, Cells: 4, FastboxSize: -1})
	a, b := eps[0], eps[1]
	f.Fuzz(func(t *testing.T, owner, src, kind uint32, tag int32, seq, n uint32, total uint64, pl []byte) {
		off, c, err := a.freeQ.dequeue(a.seg)
		if err != nil || off == 0 {
			t.Fatalf("rank 0 has no free cell (%v): one did not come home", err)
		}
		copy(a.seg.payload(off), pl)
		p := &b.peers[0]
		c.owner, c.src, c.kind, c.tag, c.seq, c.len, c.total = owner, src, kind, tag, p.recvSeq+seq%3, n, total
		if err := a.peers[1].recvQ.enqueue(a.seg, off, c); err != nil {
			t.Fatal(err)
		}
		got, gc, err := b.recvQ.dequeue(b.seg)
		if err != nil || got != off {
			t.Fatalf("dequeued %#x (%v), want %#x", got, err, off)
		}
		err = b.handleCell(got, gc)
		if errors.Is(err, ErrNoLMT) {
			err = nil // a control packet: this endpoint has no LMT
		}
		settle(t, b, err)
		var home []uint64
		for {
			back, _, err := a.freeQ.dequeue(a.seg)
			if err != nil {
				t.Fatal(err)
			}
			if back == 0 {
				break
			}
			home = append(home, back)
		}
		if len(home) != 4 {
			t.Fatalf("rank 0 has %d free cells of 4: its cell %#x did not come home", len(home), off)
		}
		for _, back := range home {
			bc, _ := a.seg.cell(back)
			if err := a.freeQ.enqueue(a.seg, back, bc); err != nil {
				t.Fatal(err)
			}
		}
		b.peers[0].fbIn[0] = nil // a fastbox announcement is forgotten too
		b.fbActive = b.fbActive[:0]
	})
}

// FuzzLineRecord writes a line record's stamp and fields as rank 0 would,
// and lets rank 1 take it.
func FuzzLineRecord(f *testing.F) {
	f.Add(int32(1), uint32(5), []byte("hello"))
	f.Add(int32(1), uint32(linePayload), make([]byte, linePayload))
	f.Add(int32(1), uint32(linePayload+1), make([]byte, linePayload))
	f.Add(int32(-5), uint32(1<<31), []byte{})
	eps := joinLocal(f, 2, &Options{CellSize: 512, Cells: 4})
	b := eps[1]
	f.Fuzz(func(t *testing.T, tag int32, n uint32, pl []byte) {
		p := &b.peers[0]
		r, at := p.lnIn, p.lnRecv
		*r.fields(at) = lineFields{seq: p.recvSeq, tag: tag, len: n}
		copy(r.payload(lineRecordAt(at, min(int(n), linePayload)), min(int(n), linePayload)), pl)
		r.stamp(at).Store(at + 1)
		ok, err := b.pollFbox(0)
		if !ok {
			t.Fatal("a stamped record of the next message was not taken")
		}
		if p.dead == nil && n > linePayload {
			t.Fatalf("took a %d-byte record (max %d)", n, linePayload)
		}
		settle(t, b, err)
		if p.lnRecv == at {
			p.lnRecv = at + 2 // refused: the next record starts past it
		}
	})
}

// FuzzArenaDescriptor hands arbitrary descriptors of a total-byte message
// to the check that guards the single copy: every piece it accepts lies in
// rank 0's region, and they hold total bytes.
func FuzzArenaDescriptor(f *testing.F) {
	desc := func(gen uint64, slot uint32, pieces ...uint64) []byte {
		d := binary.LittleEndian.AppendUint64(nil, gen)
		d = binary.LittleEndian.AppendUint32(d, slot)
		d = binary.LittleEndian.AppendUint32(d, uint32(len(pieces)/2))
		for _, v := range pieces {
			d = binary.LittleEndian.AppendUint64(d, v)
		}
		return d
	}
	f.Add(desc(1, 0, 0, 100), int64(100))
	f.Add(desc(1, 0, 1<<20-50, 100), int64(100))
	f.Add(desc(1, 0, 1<<62, 100), int64(100))
	f.Add(desc(1, 70, 0, 100), int64(100))
	f.Add(desc(1, 0, 0, 1<<63, 1<<63, 1<<63), int64(0))
	eps := joinLocal(f, 2, &Options{CellSize: 512, Cells: 4, ArenaSize: 1 << 20})
	b := eps[1]
	f.Fuzz(func(t *testing.T, d []byte, total int64) {
		if total < 0 {
			total = -total
		}
		slot, _, pieces, err := b.arenaDesc(0, int(total), d)
		if err != nil {
			wantCorrupt(t, err, 0)
			return
		}
		region, sum := uint64(len(b.seg.region(0))), uint64(0)
		for ; len(pieces) > 0; pieces = pieces[arenaPieceSize:] {
			off, n := binary.LittleEndian.Uint64(pieces), binary.LittleEndian.Uint64(pieces[8:])
			if off+n > region || off+n < off {
				t.Fatalf("accepted %d bytes at %d in a %d-byte region", n, off, region)
			}
			sum += n
		}
		if slot < 0 || slot >= arenaSlots || sum != uint64(total) {
			t.Fatalf("accepted slot %d, pieces of %d bytes for %d", slot, sum, total)
		}
	})
}

// FuzzNetPacket hands arbitrary network packets, header and payload, to
// a rank as its network module would, from rank 2, on another node.
func FuzzNetPacket(f *testing.F) {
	hdr := func(kind, src, seq uint32, tag int32, n uint32, total uint64) []byte {
		h := make([]byte, NetHeaderSize)
		binary.LittleEndian.PutUint32(h, kind)
		binary.LittleEndian.PutUint32(h[4:], src)
		binary.LittleEndian.PutUint32(h[8:], seq)
		binary.LittleEndian.PutUint32(h[12:], uint32(tag))
		binary.LittleEndian.PutUint32(h[16:], n)
		binary.LittleEndian.PutUint64(h[24:], total)
		return h
	}
	f.Add(hdr(kindMsg, 2, 0, 1, 5, 5), []byte("hello"))
	f.Add(hdr(kindMsg, 2, 0, 1, 5, 1<<62), []byte("hello"))
	f.Add(hdr(kindMsg, 2, 0, 1, 5, 1<<40), []byte("hello"))
	f.Add(hdr(kindCont, 2, 0, 1, 5, 0), []byte("hello"))
	f.Add(hdr(kindRTS, 2, 0, 1, 3, 1<<63), []byte("rts"))
	f.Add(hdr(kindMsg, 2, 9, 1, 5, 5), []byte("hello"))
	f.Add(hdr(kindMsg, 2, 0, 1, 6, 6), []byte("hello"))
	f.Add(hdr(77, 2, 0, 1, 0, 0), []byte{})
	f.Add([]byte{1, 2, 3}, []byte{})
	eps, _ := joinTwoNodes(f, 1<<16)
	b := eps[0]
	f.Fuzz(func(t *testing.T, h, payload []byte) {
		if len(h) >= NetHeaderSize {
			binary.LittleEndian.PutUint32(h[4:], 2) // a packet from another rank is trust-net's
			switch k := binary.LittleEndian.Uint32(h); k {
			case kindNetBye, kindNetPing, kindControl:
				binary.LittleEndian.PutUint32(h, kindMsg) // liveness and the LMT are tested apart
			}
		}
		p := &b.peers[2]
		if len(h) >= NetHeaderSize {
			binary.LittleEndian.PutUint32(h[8:], p.recvSeq+binary.LittleEndian.Uint32(h[8:])%2)
		}
		err := (*netEvents)(b).Arrived(h, payload)
		if len(h) < NetHeaderSize {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a %d-byte header: %v, want ErrCorrupt", len(h), err)
			}
			b.fatal = nil // no rank can be blamed: the endpoint's, forgiven here
			return
		}
		if err != nil || b.fatal != nil {
			t.Fatalf("the endpoint failed: %v (fatal %v); only rank 2 may", err, b.fatal)
		}
		if d := p.dead; d != nil {
			wantCorrupt(t, d, 2)
			forgive(b, 2)
		}
		if a := &p.asm; a.ux != nil {
			if cap(a.ux.data) > 2*len(a.ux.data) && cap(a.ux.data) > len(a.ux.small) {
				t.Fatalf("%d bytes held for %d that came", cap(a.ux.data), len(a.ux.data))
			}
			*a = assembly{}
		}
		drainUnexpected(b)
	})
}
