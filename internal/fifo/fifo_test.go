package fifo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func fakeCap(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pipe-max-size")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		cap       string
		want, min int
		size      int
		capped    bool
		fails     bool
	}{
		{"1048576\n", 1 << 20, 64 << 10, 1 << 20, false, false},
		{"262144\n", 1 << 20, 64 << 10, 256 << 10, true, false}, // lowered, still usable
		{"32768\n", 1 << 20, 64 << 10, 32 << 10, true, true},    // below the minimum
		{"65536", 65536, 65536, 65536, false, false},
	} {
		size, capped, err := Plan(c.want, c.min, fakeCap(t, c.cap))
		var ce *CapError
		if size != c.size || capped != c.capped || (err != nil) != c.fails || c.fails && !errors.As(err, &ce) {
			t.Errorf("cap %q want %d min %d: Plan = %d, %v, %v; want %d, %v, fails=%v", c.cap, c.want, c.min, size, capped, err, c.size, c.capped, c.fails)
		}
	}
	if _, _, err := Plan(1<<20, 1, fakeCap(t, "lots")); err == nil {
		t.Error("a cap file without a number was accepted")
	}
	if _, _, err := Plan(1<<20, 1, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing cap file was accepted")
	}
}

// TestReaderSizesPipe: the read end gets the planned capacity, and a writer
// can then open the FIFO without blocking.
func TestReaderSizesPipe(t *testing.T) {
	dir := t.TempDir()
	rx := New(dir, "pipe", 1, 2, 128<<10)
	tx := New(dir, "pipe", 0, 2, 128<<10)
	defer rx.Close()
	defer tx.Close()
	r, err := rx.Reader(0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := unix.FcntlInt(uintptr(r), unix.F_GETPIPE_SZ, 0); err != nil || got != 128<<10 {
		t.Fatalf("pipe size %d, %v; want %d", got, err, 128<<10)
	}
	w, err := tx.Writer(1)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("through the fifo")
	if n, err := Writev(w, []unix.Iovec{{Base: &msg[0], Len: uint64(len(msg))}}); n != len(msg) || err != nil {
		t.Fatalf("Writev = %d, %v", n, err)
	}
	got := make([]byte, 64)
	if n, err := Readv(r, []unix.Iovec{{Base: &got[0], Len: 64}}); n != len(msg) || err != nil || string(got[:n]) != string(msg) {
		t.Fatalf("Readv = %d, %v, %q", n, err, got[:n])
	}
	if n, err := Readv(r, []unix.Iovec{{Base: &got[0], Len: 64}}); n != 0 || err != nil {
		t.Fatalf("Readv on an empty pipe = %d, %v; want 0, nil", n, err)
	}
	tx.Close()
	if _, err := Readv(r, []unix.Iovec{{Base: &got[0], Len: 64}}); err != ErrEOF {
		t.Fatalf("Readv after the writer closed: %v, want ErrEOF", err)
	}
}
