package nemesis

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/knemesis/knemesis/nemesis/launch"
)

const testArena = 64 << 10

// TestArenaAllocFree: buffers come from this rank's region, on a line,
// disjoint, and what is freed is merged back so that the whole region can
// be had again.
func TestArenaAllocFree(t *testing.T) {
	eps := joinLocal(t, 2, &Options{ArenaSize: testArena - 100}) // rounded up to pages
	ep := eps[0]
	region := ep.ArenaRegion(0)
	if len(region) != testArena {
		t.Fatalf("region of %d bytes, want %d", len(region), testArena)
	}
	if other := eps[1].ArenaRegion(0); len(other) != testArena || unsafe.SliceData(other) == unsafe.SliceData(eps[1].ArenaRegion(1)) {
		t.Fatalf("rank 1 maps rank 0's region as %d bytes, want %d apart from its own", len(other), testArena)
	}
	var bufs [][]byte
	for _, n := range []int{1, 100, 4096, 65, 20000} {
		b, err := ep.Alloc(n)
		if err != nil {
			t.Fatalf("Alloc(%d): %v", n, err)
		}
		if len(b) != n || cap(b) != n {
			t.Fatalf("Alloc(%d): len %d cap %d", n, len(b), cap(b))
		}
		off := uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&region[0]))
		if off%arenaAlign != 0 || off+uintptr(n) > testArena {
			t.Fatalf("Alloc(%d) at offset %d, want a line inside the region", n, off)
		}
		for i := range b {
			b[i] = byte(len(bufs) + 1)
		}
		bufs = append(bufs, b)
		if !ep.InArena([][]byte{b, nil}) || eps[1].InArena([][]byte{b}) {
			t.Fatalf("InArena of rank 0's buffer: rank 0 %v, rank 1 %v; want true, false", ep.InArena([][]byte{b}), eps[1].InArena([][]byte{b}))
		}
	}
	for i, b := range bufs {
		for _, c := range b {
			if c != byte(i+1) {
				t.Fatalf("buffer %d overwritten by another: %d", i, c)
			}
		}
	}
	for _, i := range []int{1, 3, 0, 4, 2} { // out of order: merging both ways
		if err := ep.Free(bufs[i]); err != nil {
			t.Fatalf("Free of buffer %d: %v", i, err)
		}
	}
	all, err := ep.Alloc(testArena)
	if err != nil {
		t.Fatalf("Alloc of the whole region after freeing everything: %v", err)
	}
	if err := ep.Free(all); err != nil {
		t.Fatal(err)
	}
}

// TestArenaBadInput: each misuse is refused with its own error, naming
// what was wrong, and leaves the arena usable.
func TestArenaBadInput(t *testing.T) {
	eps := joinLocal(t, 2, &Options{ArenaSize: testArena})
	ep := eps[0]
	held, err := ep.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ep.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.Free(b); err != nil {
		t.Fatal(err)
	}
	// Rank 1's region as rank 0 maps it: where a peer's buffer would
	// be, seen from here.
	peerBuf := ep.ArenaRegion(1)[:64]
	for _, c := range []struct {
		name string
		err  error
		want error
		says string
	}{
		{"double free", ep.Free(b), ErrDoubleFree, "freed twice"},
		{"foreign buffer", ep.Free(make([]byte, 64)), ErrForeignBuffer, "not in the shared arena"},
		{"peer's buffer", ep.Free(peerBuf), ErrForeignBuffer, "arena of rank 1"},
		{"inside a block", ep.Free(held[64:]), ErrInvalidArg, "64 bytes into"},
		{"exhaustion", allocErr(ep, testArena), ErrArenaFull, "raise Options.ArenaSize"},
		{"zero bytes", allocErr(ep, 0), ErrInvalidArg, "want more than 0"},
	} {
		if !errors.Is(c.err, c.want) || !strings.Contains(c.err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.name, c.err, c.want, c.says)
		}
	}
	if err := ep.Free(held); err != nil {
		t.Fatalf("the arena is no longer usable after refusals: %v", err)
	}
	if _, err := ep.Alloc(testArena); err != nil {
		t.Fatalf("the arena is no longer whole after refusals: %v", err)
	}

	none := joinLocal(t, 1, nil)[0]
	if _, err := none.Alloc(8); !errors.Is(err, ErrNoArena) || !strings.Contains(err.Error(), "Options.ArenaSize") {
		t.Errorf("Alloc without an arena: %v, want ErrNoArena naming Options.ArenaSize", err)
	}
	if err := none.Free(make([]byte, 8)); !errors.Is(err, ErrForeignBuffer) {
		t.Errorf("Free without an arena: %v, want ErrForeignBuffer", err)
	}
	if _, err := Join(launch.NewJobName(), 0, 1, &Options{ArenaSize: -1}); !errors.Is(err, ErrInvalidArg) {
		t.Errorf("Join with a negative arena: %v, want ErrInvalidArg", err)
	}
}

func allocErr(ep *Endpoint, n int) error {
	_, err := ep.Alloc(n)
	return err
}

// TestArenaInSegment: the arena is part of the segment, SegmentSize counts
// it (each rank's region and its page of completion slots), and ranks that
// disagree on it fail Join with ErrLayout.
func TestArenaInSegment(t *testing.T) {
	plain, _ := SegmentSize(3, nil)
	with, err := SegmentSize(3, &Options{ArenaSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(3<<20 + 3*arenaSlotBytes); with-plain < want || with-plain >= want+4096 {
		t.Errorf("an arena of 1 MiB per rank grows a 3-rank segment by %d bytes, want 3 MiB and 3 pages of completion slots (+ page rounding)", with-plain)
	}
	job := launch.NewJobName()
	errs := make(chan error, 2)
	for r, size := range []int{testArena, 2 * testArena} {
		go func() {
			ep, err := Join(job, r, 2, &Options{ArenaSize: size, JoinTimeout: 2e9})
			if err == nil {
				defer ep.Close()
			}
			errs <- err
		}()
	}
	var layoutErrs int
	for range 2 {
		if err := <-errs; errors.Is(err, ErrLayout) && strings.Contains(err.Error(), "arena") {
			layoutErrs++
		}
	}
	if layoutErrs != 1 {
		t.Errorf("%d ranks got ErrLayout naming the arena, want rank 1 only", layoutErrs)
	}
}

// TestJoinRefusesAnArenaShmCannotHold: an arena larger than /dev/shm's free
// space fails Join with a SpaceError that names the arena's share and the
// fix, and leaves nothing behind (never a SIGBUS on a later first touch).
func TestJoinRefusesAnArenaShmCannotHold(t *testing.T) {
	const ranks = 48
	o := &Options{ArenaSize: maxArenaSize} // 16 GiB per rank
	need, err := SegmentSize(ranks, o)
	if err != nil {
		t.Fatal(err)
	}
	job := launch.NewJobName()
	_, err = Join(job, 0, ranks, o)
	var se *SpaceError
	if !errors.As(err, &se) {
		t.Fatalf("Join of a %d-byte segment: %v, want a SpaceError", need, err)
	}
	if se.Need != need || se.Arena != ranks*maxArenaSize || se.Free >= need {
		t.Fatalf("SpaceError %+v, want Need %d, Arena %d", *se, need, uint64(ranks*maxArenaSize))
	}
	for _, s := range []string{sizeString(need), sizeString(se.Arena) + " of it the shared arena", "--shm-size", "Options.ArenaSize"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if left, _ := filepath.Glob("/dev/shm/*" + job + "*"); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
