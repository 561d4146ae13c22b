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

// TestRingWrapAndFull: one writer fills the ring, finds it full without
// writing anything, and goes on three laps as the reader takes; every
// record comes out once, in order, with its fields.
func TestRingWrapAndFull(t *testing.T) {
	r := newRing()
	next, taken := 0, 0
	for lap := range 3 {
		for r.push(1, next, 8*next, next%7) {
			next++
		}
		if got := next - taken; got != ringSlots {
			t.Fatalf("lap %d: the ring took %d records before it was full, want %d", lap, got, ringSlots)
		}
		if r.push(1, 9999, 0, 0) {
			t.Fatal("a push into the full ring succeeded")
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
	if n, writer, ok := r.take(); ok || writer != -1 {
		t.Fatalf("take from the empty ring: %+v, writer %d, ok %v", n, writer, ok)
	}
}

// TestRingDeadWriter: a writer that reserved a slot and stopped (killed
// before its tail update and before publishing) holds the others up
// neither when they write (they move the tail past it) nor, once skipped,
// when the reader reads: the reader is told who holds the slot.
func TestRingDeadWriter(t *testing.T) {
	r := newRing()
	r.push(1, 10, 0, 1)
	// Rank 2 reserves slot 1 and dies before moving the tail.
	if !r.slots[1].stamp.CompareAndSwap(stampFree(0), stampReserved|2) {
		t.Fatal("reserving slot 1 by hand failed")
	}
	if !r.push(3, 30, 0, 1) {
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
	// The skipped slot serves the next lap.
	for i := range ringSlots {
		if !r.push(1, i, 0, 0) {
			t.Fatalf("push %d of a lap after the skip: full", i)
		}
	}
	if r.push(1, 0, 0, 0) {
		t.Fatal("a lap and one after the skip: not full")
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
			for i := 0; i < each; {
				if r.push(src, i, src, i) {
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
