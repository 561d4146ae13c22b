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
	if ok {
		p.publish(t, src, tag, off, n)
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
			n, ok := r.take()
			want := Notification{Source: 1, Tag: taken, Offset: 8 * taken, Len: taken % 7}
			if !ok || n != want {
				t.Fatalf("take %d: %+v, ok %v; want %+v", taken, n, ok, want)
			}
			taken++
		}
	}
	for ; taken < next; taken++ {
		if n, ok := r.take(); !ok || n.Tag != taken {
			t.Fatalf("take %d: %+v, %v", taken, n, ok)
		}
	}
	if n, ok := r.take(); ok || r.held() {
		t.Fatalf("take from the empty ring: %+v, ok %v, held %v", n, ok, r.held())
	}
}

// TestRingHeld: a position taken and not published (a writer killed
// between its reservation and its stamp) stops the reader there, the ring held,
// whatever was published behind it; once published, both come in order.
func TestRingHeld(t *testing.T) {
	r := newRing()
	p1, p2 := r.noteRing, r.noteRing
	push(&p1, 1, 10, 0, 1)
	t2, _ := p2.reserve()
	push(&p1, 1, 11, 0, 1)
	if n, ok := r.take(); !ok || n.Tag != 10 {
		t.Fatalf("first take: %+v, %v", n, ok)
	}
	if n, ok := r.take(); ok || !r.held() {
		t.Fatalf("take at the position taken and not published: %+v, ok %v, held %v; want nothing, held", n, ok, r.held())
	}
	p2.publish(t2, 2, 20, 0, 1)
	for _, want := range []int{20, 11} {
		if n, ok := r.take(); !ok || n.Tag != want {
			t.Fatalf("take: %+v, %v; want tag %d", n, ok, want)
		}
	}
	if r.held() {
		t.Fatal("the ring is held with nothing taken")
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
		n, ok := r.take()
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
	if n, ok := r.take(); ok {
		t.Fatalf("a record more: %+v", n)
	}
}
