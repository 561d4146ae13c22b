package copyprobe_test

import (
	"io"
	"os"
	"testing"

	"github.com/knemesis/knemesis/tools/copyprobe"
)

// TestUsageOpen counts the copies of a pipe transfer made by this very
// process: one into the pipe, one out. A launcher would call
// TrackChildren(os.Getpid()) before starting its ranks instead. (A test,
// not an example: loading BPF needs root, and an example cannot skip.)
func TestUsageOpen(t *testing.T) {
	needRoot(t)
	p, err := copyprobe.Open(copyprobe.Options{Kernel: copyprobe.KernelTracepoint})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Track(os.Getpid()); err != nil {
		t.Fatal(err)
	}

	const n = 1 << 20
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		w.Write(make([]byte, n)) // one copy into the pipe
		w.Close()
	}()
	if got, err := io.Copy(io.Discard, r); err != nil || got != n { // one copy out
		t.Fatalf("read %d bytes, %v; want %d", got, err, n)
	}

	rep, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%v", rep) // the bytes per copier, and how each was counted
	if rep.Bytes.Kernel != 2*n || rep.Bytes.User != 0 {
		t.Errorf("kernel %d bytes, user %d; want 2 × %d and 0", rep.Bytes.Kernel, rep.Bytes.User, n)
	}
	if c := rep.CopiesPerByte(n); c.Kernel != 2 || c.User != 0 {
		t.Errorf("copies per byte %+v, want kernel 2, user 0", c)
	}
}
