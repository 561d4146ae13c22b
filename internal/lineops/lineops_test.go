package lineops

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"
)

func TestStoreReleaseStoresOnlyItsWord(t *testing.T) {
	var words [3]atomic.Uint32
	for i := range words {
		words[i].Store(0xdeadbeef)
	}
	StoreRelease(&words[1], 7)
	if a, b, c := words[0].Load(), words[1].Load(), words[2].Load(); a != 0xdeadbeef || b != 7 || c != 0xdeadbeef {
		t.Fatalf("words after StoreRelease(&words[1], 7) = %#x %#x %#x", a, b, c)
	}
	var wide [3]atomic.Uint64
	for i := range wide {
		wide[i].Store(0xdeadbeefdeadbeef)
	}
	StoreRelease64(&wide[1], 1<<40+7)
	if a, b, c := wide[0].Load(), wide[1].Load(), wide[2].Load(); a != 0xdeadbeefdeadbeef || b != 1<<40+7 || c != 0xdeadbeefdeadbeef {
		t.Fatalf("words after StoreRelease64(&wide[1], 1<<40+7) = %#x %#x %#x", a, b, c)
	}
}

// TestStoreReleasePublishes hands a payload from one goroutine to another
// through a flag stored with StoreRelease, as a fastbox does between
// processes: the reader that sees the flag must see every payload word the
// writer stored before it.
func TestStoreReleasePublishes(t *testing.T) {
	const rounds = 20000
	type box struct {
		full    atomic.Uint32
		payload [16]uint64 // plain memory, as a fastbox's payload
	}
	var b box
	done := make(chan error, 1)
	go func() {
		for i := uint64(1); i <= rounds; i++ {
			for b.full.Load() == 0 {
				runtime.Gosched()
			}
			for k := range b.payload {
				if v := b.payload[k]; v != i {
					done <- fmt.Errorf("round %d: payload word %d read %d", i, k, v)
					return
				}
			}
			StoreRelease(&b.full, 0)
		}
		done <- nil
	}()
	for i := uint64(1); i <= rounds; i++ {
		for b.full.Load() != 0 {
			runtime.Gosched()
		}
		for k := range b.payload {
			b.payload[k] = i
		}
		StoreRelease(&b.full, 1)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestPrefetchLeavesMemoryAlone(t *testing.T) {
	buf := []byte("a line the receiver will read next")
	Prefetch(unsafe.Pointer(&buf[0]))
	if string(buf) != "a line the receiver will read next" {
		t.Fatalf("buffer after Prefetch = %q", buf)
	}
}
