package copyprobe

import (
	"os"
	"sync"
	"testing"

	"github.com/knemesis/knemesis/internal/memcopy"
)

// deep recurses n frames and then calls memcopy.Copy, so that over a sweep
// of n some call finds the stack exhausted right at Copy's own prologue.
//
//go:noinline
func deep(n int, dst, src []byte) int {
	var pad [4]uint64
	if n == 0 {
		return memcopy.Copy(dst, src)
	}
	pad[n%4] = uint64(n)
	return deep(n-1, dst, src) + int(pad[(n+1)%4])
}

// sweep calls memcopy.Copy once per depth, each on a fresh goroutine and
// so a fresh small stack, and returns the bytes it copied.
func sweep(depths int) uint64 {
	dst, src := make([]byte, 4096), make([]byte, 4096)
	var wg sync.WaitGroup
	for n := range depths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deep(n, dst, src)
		}()
		wg.Wait() // one at a time: dst is shared
	}
	return uint64(depths) * 4096
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

	want := sweep(600)

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
