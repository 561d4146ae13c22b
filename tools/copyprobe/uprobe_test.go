package copyprobe

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/knemesis/knemesis/internal/memcopy"
)

// deep recurses n frames and then calls memcopy.Copy through last, so that
// over a sweep of n some call finds the stack exhausted right at Copy's own
// prologue.
//
//go:noinline
func deep(n int, last func(n int, dst, src []byte) int, dst, src []byte) int {
	var pad [4]uint64
	if n == 0 {
		return last(n, dst, src)
	}
	pad[n%4] = uint64(n)
	return deep(n-1, last, dst, src) + int(pad[(n+1)%4])
}

// The lasts call Copy from frames 8 bytes apart in size. deep's frames are
// larger than the window in which Copy, and not its caller, is the function
// whose prologue finds the stack exhausted: recursion alone steps over that
// window at some stack sizes, and then no call grows the stack in Copy.
//
//go:noinline
func last[Pad [1]uint64 | [2]uint64 | [3]uint64 | [4]uint64 | [5]uint64 | [6]uint64 | [7]uint64 | [8]uint64](n int, dst, src []byte) int {
	var pad Pad
	pad[n%len(pad)] = uint64(n)
	return memcopy.Copy(dst, src) + int(pad[(n+1)%len(pad)])
}

// Each array type is its own instantiation (a GC shape of its own), so
// each has its own frame size.
var lasts = []func(n int, dst, src []byte) int{
	last[[1]uint64], last[[2]uint64], last[[3]uint64], last[[4]uint64],
	last[[5]uint64], last[[6]uint64], last[[7]uint64], last[[8]uint64],
}

// sweep calls memcopy.Copy once per depth and last frame, each on a fresh
// goroutine and so a fresh small stack, and returns the bytes it copied.
// Garbage collection is off meanwhile: the runtime sizes new goroutines'
// stacks by the average it scanned at the last collection, and one run
// while a deep goroutine lived started the rest with stacks larger than
// the deepest call, which then grew nowhere (seen once in a CI guest).
func sweep(depths int) uint64 {
	dst, src := make([]byte, 4096), make([]byte, 4096)
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var wg sync.WaitGroup
	for n := range depths {
		for _, last := range lasts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				deep(n, last, dst, src)
			}()
			wg.Wait() // one at a time: dst is shared
		}
	}
	return uint64(depths*len(lasts)) * 4096
}

// A Go function whose stack must grow runs its entry twice: morestack jumps
// back to it. The uprobe sits past the stack check, so such a call counts
// once; a probe on the entry (the control) counts it twice.
func TestUprobeCountsACallThatGrowsTheStackOnce(t *testing.T) {
	p := openTracepoint(t)
	if !p.user.Attached() {
		t.Fatalf("user copier: %v", p.user)
	}
	control, err := Open(Options{Kernel: KernelTracepoint, Executable: "/nonexistent"})
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	exe, _ := os.Executable()
	offset, skip, err := goSymbolOffset(exe, memcopy.Symbol)
	if err != nil {
		t.Fatal(err)
	}
	if skip == 0 {
		t.Fatalf("no stack check found in %s", memcopy.Symbol)
	}
	if err := control.attachUprobe(exe, offset-skip); err != nil {
		t.Fatal(err)
	}
	for _, q := range []*Probe{p, control} {
		if err := q.Track(os.Getpid()); err != nil {
			t.Fatal(err)
		}
	}

	want := sweep(1000)

	got, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	entry, err := control.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got.Bytes.User != want {
		t.Errorf("uprobe past the stack check counted %d bytes, want exactly %d", got.Bytes.User, want)
	}
	if entry.Bytes.User <= want {
		t.Errorf("control probe on the entry counted %d bytes, want more than %d: the sweep grew no stack inside Copy, so it proves nothing", entry.Bytes.User, want)
	}
	t.Logf("%d bytes copied; entry probe counted %d (%d calls grew the stack in Copy)", want, entry.Bytes.User, (entry.Bytes.User-want)/4096)
}
