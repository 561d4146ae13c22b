package nemesis

import (
	"bytes"
	"errors"
	"testing"
)

// TestLibTagsApartFromApplication: the application's calls refuse library
// tags, and its wildcard receives and probes pass over library messages
// (which wait, unexpected, for their library receive) whichever way they
// came: line record, fastbox, cells.
func TestLibTagsApartFromApplication(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 8})
	a, b := eps[0], eps[1]
	var r Request
	if err := a.Isend(&r, 1, MinLibTag, nil); !errors.Is(err, ErrInvalidTag) {
		t.Fatalf("Isend with a library tag: %v, want ErrInvalidTag", err)
	}
	if err := b.Irecv(&r, 0, MaxLibTag, nil); !errors.Is(err, ErrInvalidTag) {
		t.Fatalf("Irecv with a library tag: %v, want ErrInvalidTag", err)
	}
	if err := a.IsendvLib(&r, 1, MaxTag, nil); !errors.Is(err, ErrInvalidTag) {
		t.Fatalf("IsendvLib with an application tag: %v, want ErrInvalidTag", err)
	}
	if err := b.IrecvvLib(&r, AnySource, AnyTag, nil); !errors.Is(err, ErrInvalidTag) {
		t.Fatalf("IrecvvLib with AnyTag: %v, want ErrInvalidTag", err)
	}
	for _, n := range []int{8, 200, 3000} { // line record, fastbox, cells
		lib, app := pattern(n, 1), pattern(n, 2)
		var ls, as, ar, lr Request
		if err := a.IsendvLib(&ls, 1, MaxLibTag, [][]byte{lib}); err != nil {
			t.Fatal(err)
		}
		if err := a.Isend(&as, 1, 5, app); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if err := b.Irecv(&ar, AnySource, AnyTag, got); err != nil {
			t.Fatal(err)
		}
		driveAll(t, []*Endpoint{a, b}, &ls, &as, &ar)
		if st := ar.Status(); st.Tag != 5 || !bytes.Equal(got, app) {
			t.Fatalf("%d bytes: the wildcard receive took tag %d, want the application's 5", n, st.Tag)
		}
		if _, ok, err := b.Iprobe(AnySource, AnyTag); ok || err != nil {
			t.Fatalf("%d bytes: a wildcard probe found the library message (%v)", n, err)
		}
		st, ok, err := b.IprobeLib(AnySource, MaxLibTag)
		if !ok || err != nil || st.Tag != MaxLibTag || st.Len != n {
			t.Fatalf("%d bytes: IprobeLib found %v (%+v, %v)", n, ok, st, err)
		}
		libGot := make([]byte, n)
		if err := b.IrecvvLib(&lr, AnySource, MaxLibTag, [][]byte{libGot}); err != nil {
			t.Fatal(err)
		}
		driveAll(t, []*Endpoint{a, b}, &lr)
		if st := lr.Status(); st.Tag != MaxLibTag || st.Source != 0 || !bytes.Equal(libGot, lib) {
			t.Fatalf("%d bytes: library receive got tag %d from %d, data equal %v", n, st.Tag, st.Source, bytes.Equal(libGot, lib))
		}
	}
}

// driveAll polls every endpoint until the requests complete, and fails the
// test with the first request's error.
func driveAll(t *testing.T, eps []*Endpoint, reqs ...*Request) {
	t.Helper()
	for i := 0; ; i++ {
		done := true
		for _, r := range reqs {
			done = done && r.Done()
		}
		if done {
			break
		}
		for _, ep := range eps {
			if err := ep.Poll(); err != nil {
				t.Fatal(err)
			}
		}
		if i > 1e7 {
			t.Fatal("requests did not complete")
		}
	}
	for _, r := range reqs {
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
}
