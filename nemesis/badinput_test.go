package nemesis

import (
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestJoinRejectsBadInput: every out-of-range argument to Join is refused
// before anything is created, with the error naming the value and the
// range it must be in.
func TestJoinRejectsBadInput(t *testing.T) {
	long := strings.Repeat("j", 201)
	for _, c := range []struct {
		job        string
		rank, size int
		o          Options
		kind       error
		want       string // after the kind's own text
	}{
		{"ok", 0, 0, Options{}, ErrInvalidArg, "job size 0, want 1..1024"},
		{"ok", 0, -3, Options{}, ErrInvalidArg, "job size -3, want 1..1024"},
		{"ok", 0, 1025, Options{}, ErrInvalidArg, "job size 1025, want 1..1024"},
		{"ok", 2, 2, Options{}, ErrInvalidRank, "rank 2 of a job of 2"},
		{"ok", -1, 2, Options{}, ErrInvalidRank, "rank -1 of a job of 2"},
		{"", 0, 1, Options{}, ErrInvalidArg, `job name "" must have 1..200 characters`},
		{long, 0, 1, Options{}, ErrInvalidArg, `job name "` + long + `" must have 1..200 characters`},
		{"../etc", 0, 1, Options{}, ErrInvalidArg, `job name "../etc": only letters, digits, '-', '_' and '.' are allowed`},
		{"ok", 0, 1, Options{CellSize: 128}, ErrInvalidArg, "cell size 128, want a power of two in 256..1048576"},
		{"ok", 0, 1, Options{CellSize: 3000}, ErrInvalidArg, "cell size 3000, want a power of two in 256..1048576"},
		{"ok", 0, 1, Options{CellSize: 2 << 20}, ErrInvalidArg, "cell size 2097152, want a power of two in 256..1048576"},
		{"ok", 0, 1, Options{CellSize: -256}, ErrInvalidArg, "cell size -256, want a power of two in 256..1048576"},
		{"ok", 0, 1, Options{Cells: -1}, ErrInvalidArg, "-1 cells per process, want 1..65536"},
		{"ok", 0, 1, Options{Cells: 65537}, ErrInvalidArg, "65537 cells per process, want 1..65536"},
		{"ok", 0, 2, Options{FastboxSize: 64}, ErrInvalidArg, "fastbox size 64, want 0 or a multiple of 64 in 128..1048576"},
		{"ok", 0, 2, Options{FastboxSize: 100}, ErrInvalidArg, "fastbox size 100, want 0 or a multiple of 64 in 128..1048576"},
		{"ok", 0, 2, Options{FastboxSize: 2 << 20}, ErrInvalidArg, "fastbox size 2097152, want 0 or a multiple of 64 in 128..1048576"},
	} {
		dir := t.TempDir()
		o := c.o
		o.Dir = dir
		_, err := Join(c.job, c.rank, c.size, &o)
		if want := c.kind.Error() + ": " + c.want; !errors.Is(err, c.kind) || err.Error() != want {
			t.Errorf("Join(%.20q, %d, %d, %+v) = %v\nwant %s", c.job, c.rank, c.size, c.o, err, want)
		}
		if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 0 {
			t.Errorf("Join(%.20q, %d, %d, %+v) left %v", c.job, c.rank, c.size, c.o, names)
		}
	}

	// Each bound alone is fine, together they ask for more than 2^40
	// bytes: 1024 ranks × 65536 cells of 1 MiB is 2^46 bytes of cells.
	_, err := Join("ok", 0, 1024, &Options{Dir: t.TempDir(), CellSize: 1 << 20, Cells: 1 << 16})
	m := regexp.MustCompile(`^nemesis: invalid argument: segment of (\d+) bytes is too large$`).FindStringSubmatch(errString(err))
	if !errors.Is(err, ErrInvalidArg) || m == nil {
		t.Fatalf("Join of a 2^46-byte job = %v, want a too-large segment", err)
	}
	if n, _ := strconv.ParseUint(m[1], 10, 64); n < 1<<46 {
		t.Errorf("segment of %d bytes named, want at least the cells' 2^46", n)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestWaitTestOtherEndpointsRequest: Wait and Test refuse a request
// started on another endpoint, or never started, without touching it: the
// request then completes on its own endpoint with the message intact.
func TestWaitTestOtherEndpointsRequest(t *testing.T) {
	eps := joinLocal(t, 2, nil)
	const want = "nemesis: invalid argument: request was not started on this endpoint"
	var idle Request
	if err := eps[0].Wait(&idle); !errors.Is(err, ErrInvalidArg) || err.Error() != want {
		t.Errorf("Wait of a request never started = %v, want %s", err, want)
	}
	if done, err := eps[0].Test(&idle); done || !errors.Is(err, ErrInvalidArg) || err.Error() != want {
		t.Errorf("Test of a request never started = %v, %v; want false, %s", done, err, want)
	}

	var r Request
	buf := make([]byte, 32)
	if err := eps[0].Irecv(&r, 1, 7, buf); err != nil {
		t.Fatal(err)
	}
	if err := eps[1].Wait(&r); !errors.Is(err, ErrInvalidArg) || err.Error() != want {
		t.Errorf("rank 1's Wait of rank 0's request = %v, want %s", err, want)
	}
	if done, err := eps[1].Test(&r); done || !errors.Is(err, ErrInvalidArg) || err.Error() != want {
		t.Errorf("rank 1's Test of rank 0's request = %v, %v; want false, %s", done, err, want)
	}
	if err := eps[1].Send(0, 7, []byte("after the refusals")); err != nil {
		t.Fatal(err)
	}
	if err := eps[0].Wait(&r); err != nil {
		t.Fatalf("rank 0's own Wait: %v", err)
	}
	if st := r.Status(); st.Source != 1 || st.Tag != 7 || string(buf[:st.Count]) != "after the refusals" {
		t.Errorf("received %+v %q, want 18 bytes from rank 1, tag 7", st, buf[:st.Count])
	}
}
