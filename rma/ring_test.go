package rma

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

// newRing is a ring in zeroed heap memory, as a fresh window file is.
func newRing() *ringReader {
	mem := make([]uint64, ringLen/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), ringLen)
	return &ringReader{noteRing: ringAt(b)}
}

// push writes one record as a producer of its own (p, over the same ring
// as r): false when the ring is full and nothing was taken.
func push(p *noteRing, src, tag, off, n int) bool {
	t, ok := p.reserve()
	for ok && !p.ready(t) {
	}
	if ok {
		p.publish(p.claim(t, src), t, src, tag, off, n)
	}
	return ok
}

// TestRingWrapAndFull: one writer fills the ring, finds it full without
// taking a position, and goes on three laps as the reader takes; every
// record comes out once, in order, with its fields.
func TestRingWrapAndFull(t *testing.T) {
	r := newRing()
	p := r.noteRing
	next, taken := 0, 0
	for lap := range 3 {
		for push(&p, 1, next, 8*next, next%7) {
			next++
		}
		if got := next - taken; got != ringSlots {
			t.Fatalf("lap %d: the ring took %d records before it was full, want %d", lap, got, ringSlots)
		}
		if tail := p.tail.pos.Load(); tail != uint64(next) {
			t.Fatalf("lap %d: tail %d after %d records: a full ring gave a position", lap, tail, next)
		}
		for range ringSlots/2 + lap {
			n, writer, ok := r.take()
			want := Notification{Source: 1, Tag: taken, Offset: 8 * taken, Len: taken % 7}
			if !ok || writer != -1 || n != want {
				t.Fatalf("take %d: %+v, writer %d, ok %v; want %+v", taken, n, writer, ok, want)
			}
			taken++
		}
	}
	for ; taken < next; taken++ {
		if n, _, ok := r.take(); !ok || n.Tag != taken {
			t.Fatalf("take %d: %+v, %v", taken, n, ok)
		}
	}
	if n, writer, ok := r.take(); ok || writer != -1 || r.held() {
		t.Fatalf("take from the empty ring: %+v, writer %d, ok %v, held %v", n, writer, ok, r.held())
	}
}

// TestRingDeadWriter: a writer that stamped its slot and stopped holds the
// others up neither when they write nor, once the reader skips the slot
// it names, when the reader reads. One that took a position and stopped
// before stamping is seen as a held position, named by no one.
func TestRingDeadWriter(t *testing.T) {
	r := newRing()
	p1, p2, p3 := r.noteRing, r.noteRing, r.noteRing
	push(&p1, 1, 10, 0, 1)
	t2, _ := p2.reserve() // rank 2 stamps and dies
	p2.claim(t2, 2)
	if !push(&p3, 3, 30, 0, 1) {
		t.Fatal("rank 3's push behind a dead reservation failed")
	}
	if n, _, ok := r.take(); !ok || n.Source != 1 || n.Tag != 10 {
		t.Fatalf("first take: %+v, %v", n, ok)
	}
	n, writer, ok := r.take()
	if ok || writer != 2 {
		t.Fatalf("take of the dead reservation: %+v, writer %d, ok %v; want writer 2", n, writer, ok)
	}
	r.skip()
	if n, _, ok := r.take(); !ok || n.Source != 3 || n.Tag != 30 {
		t.Fatalf("take after the skip: %+v, %v; want rank 3's tag 30", n, ok)
	}
	// The skipped slot serves the next lap, and a full one after it.
	for i := range ringSlots {
		if !push(&p1, 1, i, 0, 0) {
			t.Fatalf("push %d of a lap after the skip: full", i)
		}
	}
	if push(&p3, 3, 0, 0, 0) {
		t.Fatal("a lap and one after the skip: not full")
	}
	for i := range ringSlots {
		if n, _, ok := r.take(); !ok || n.Tag != i {
			t.Fatalf("take %d of the lap: %+v, %v", i, n, ok)
		}
	}
	// Rank 2 takes a position and dies before stamping it.
	if _, ok := p2.reserve(); !ok {
		t.Fatal("reserve in an empty ring: full")
	}
	push(&p3, 3, 31, 0, 0)
	if n, writer, ok := r.take(); ok || writer != -1 || !r.held() {
		t.Fatalf("take at an unstamped position: %+v, writer %d, ok %v, held %v; want nothing, held", n, writer, ok, r.held())
	}
}

// TestRingProducers: writers on several goroutines contend for one ring
// whose reader takes as they write; each writer's records come out in its
// order, none lost or doubled.
func TestRingProducers(t *testing.T) {
	const writers, each = 4, 5000
	r := newRing()
	var wg sync.WaitGroup
	for src := 1; src <= writers; src++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := r.noteRing
			for i := 0; i < each; {
				if push(&p, src, i, src, i) {
					i++
				}
			}
		}()
	}
	next := make([]int, writers+1)
	var err error
	for got := 0; got < writers*each; {
		n, _, ok := r.take()
		if !ok {
			continue
		}
		got++
		if err == nil && (n.Source < 1 || n.Source > writers || n.Tag != next[n.Source] || n.Len != n.Tag || n.Offset != n.Source) {
			err = fmt.Errorf("record %d: %+v, want tag %d of rank %d next", got, n, next[max(0, min(n.Source, writers))], n.Source)
		}
		if n.Source >= 1 && n.Source <= writers {
			next[n.Source]++
		}
	}
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if n, _, ok := r.take(); ok {
		t.Fatalf("a record more: %+v", n)
	}
}
