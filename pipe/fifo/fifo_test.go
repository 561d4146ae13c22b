package fifo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// listing returns the names in dir, or ["<absent>"] when dir does not exist.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return []string{"<absent>"}
	}
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func wantListing(t *testing.T, when, dir string, want ...string) {
	t.Helper()
	if got := listing(t, dir); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("%s: %s holds %q, want %q", when, dir, got, want)
	}
}

// TestNameRemoved: a FIFO's name is in the job directory only between the
// receiver making it and the writer opening it, whichever side learns first
// that it is no longer needed, and the directory goes with the last name.
func TestNameRemoved(t *testing.T) {
	msg := []byte("x")
	buf := make([]byte, 8)
	one := []unix.Iovec{{Base: &msg[0], Len: 1}}
	in := []unix.Iovec{{Base: &buf[0], Len: 8}}

	t.Run("writer opens", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "job")
		rx, tx := New(dir, "pipe", 1, 2, 64<<10), New(dir, "pipe", 0, 2, 64<<10)
		defer rx.Close()
		defer tx.Close()
		if _, err := rx.Reader(0); err != nil {
			t.Fatal(err)
		}
		wantListing(t, "after Reader", dir, "pipe-0-1")
		if _, err := tx.Writer(1); err != nil {
			t.Fatal(err)
		}
		wantListing(t, "after Writer", dir, "<absent>")
	})

	t.Run("first bytes", func(t *testing.T) {
		// A writer that opened the FIFO and died before removing
		// its name: the receiver removes it when the bytes arrive.
		dir := filepath.Join(t.TempDir(), "job")
		rx := New(dir, "pipe", 1, 2, 64<<10)
		defer rx.Close()
		if _, err := rx.Reader(0); err != nil {
			t.Fatal(err)
		}
		w, err := unix.Open(filepath.Join(dir, "pipe-0-1"), unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(w)
		if n, err := rx.Read(0, in); n != 0 || err != nil {
			t.Fatalf("Read of an empty pipe = %d, %v", n, err)
		}
		wantListing(t, "writer open, nothing read", dir, "pipe-0-1")
		if n, err := Writev(w, one); n != 1 || err != nil {
			t.Fatalf("Writev = %d, %v", n, err)
		}
		if n, err := rx.Read(0, in); n != 1 || err != nil || buf[0] != 'x' {
			t.Fatalf("Read = %d, %v, %q", n, err, buf[:n])
		}
		wantListing(t, "after the first bytes", dir, "<absent>")
	})

	t.Run("sender never opens", func(t *testing.T) {
		// The sender died after the CTS: the receiver drops the pipe.
		dir := filepath.Join(t.TempDir(), "job")
		rx := New(dir, "pipe", 1, 3, 64<<10)
		defer rx.Close()
		for _, src := range []int{0, 2} {
			if _, err := rx.Reader(src); err != nil {
				t.Fatal(err)
			}
		}
		wantListing(t, "after two Readers", dir, "pipe-0-1", "pipe-2-1")
		rx.Drop(0)
		wantListing(t, "after Drop(0)", dir, "pipe-2-1")
		rx.Close()
		wantListing(t, "after Close", dir, "<absent>")
	})

	t.Run("receiver gone", func(t *testing.T) {
		// The receiver died after its CTS: the writer's open finds no
		// reader (ENXIO) and removes the orphan.
		dir := filepath.Join(t.TempDir(), "job")
		rx, tx := New(dir, "pipe", 1, 2, 64<<10), New(dir, "pipe", 0, 2, 64<<10)
		defer tx.Close()
		if _, err := rx.Reader(0); err != nil {
			t.Fatal(err)
		}
		unix.Close(rx.readers[0]) // as the kernel does for a killed rank
		if _, err := tx.Writer(1); !errors.Is(err, unix.ENXIO) {
			t.Fatalf("Writer with no reader = %v, want ENXIO", err)
		}
		wantListing(t, "after the failed open", dir, "<absent>")
	})
}

// TestForeignDirectoryRefused: a job directory that another user could have
// prepared in a shared $TMPDIR is refused, with the reason, and no pipe is
// made in it.
func TestForeignDirectoryRefused(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{open: "has mode 0777, writable by other users", link: "is not a directory"}
	for dir, want := range cases {
		rx := New(dir, "pipe", 1, 2, 64<<10)
		_, err := rx.Reader(0)
		rx.Close()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Reader in %s: %v, want an error saying %q", filepath.Base(dir), err, want)
		}
		real := dir
		if dir == link {
			real = target
		}
		if names, _ := os.ReadDir(real); len(names) != 0 {
			t.Errorf("%s holds %v after the refusal, want nothing", filepath.Base(dir), names)
		}
	}
}

// TestForeignOwnerRefused: a directory that belongs to another user is
// refused, naming the owner, and no pipe is made in it. Giving a directory
// away takes CAP_CHOWN (root in CI, which runs this test).
func TestForeignOwnerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("lacks root: making a directory owned by another uid needs CAP_CHOWN")
	}
	theirs := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	rx := New(theirs, "pipe", 1, 2, 64<<10)
	_, err := rx.Reader(0)
	rx.Close()
	const want = "belongs to uid 65534, not to this process (uid 0)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Reader in a directory of uid 65534: %v, want an error saying %q", err, want)
	}
	if names, _ := os.ReadDir(theirs); len(names) != 0 {
		t.Errorf("the directory holds %v after the refusal, want nothing", names)
	}
}
