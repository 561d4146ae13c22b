package nemesis

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/knemesis/knemesis/nemesis/launch"
)

// joinLocal joins every rank of a job from this one process: each Endpoint
// maps the segment separately, exactly as separate processes would.
func joinLocal(t testing.TB, size int, o *Options) []*Endpoint {
	t.Helper()
	job := launch.NewJobName()
	eps := make([]*Endpoint, size)
	errs := make(chan error, size)
	for r := 0; r < size; r++ {
		go func() {
			ep, err := Join(job, r, size, o)
			eps[r] = ep
			errs <- err
		}()
	}
	for range size {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, ep := range eps {
			ep.Close()
		}
	})
	return eps
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + seed)
	}
	return b
}

// exchange sends msg from a to b with Isend/Irecv driven by one goroutine.
func exchange(t *testing.T, a, b *Endpoint, tag int, msg []byte, rbuf []byte) (Status, error) {
	t.Helper()
	var s, r Request
	if err := a.Isend(&s, b.Rank(), tag, msg); err != nil {
		t.Fatal(err)
	}
	if err := b.Irecv(&r, a.Rank(), tag, rbuf); err != nil {
		t.Fatal(err)
	}
	for i := 0; !(s.Done() && r.Done()); i++ {
		if err := a.Poll(); err != nil {
			t.Fatal(err)
		}
		if err := b.Poll(); err != nil {
			t.Fatal(err)
		}
		if i > 1e7 {
			t.Fatal("exchange did not complete")
		}
	}
	if s.err != nil {
		t.Fatalf("send: %v", s.err)
	}
	return r.Status(), r.err
}

func TestSizes(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 4})
	p := eps[0].CellPayload()
	fb := eps[0].FastboxPayload()
	for _, n := range []int{0, 1, fb - 1, fb, fb + 1, p - 1, p, p + 1, 2*p - 1, 2 * p, 2*p + 1, 10*p + 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			msg := pattern(n, n)
			rbuf := make([]byte, n+16)
			for i := range rbuf {
				rbuf[i] = 0xEE
			}
			st, err := exchange(t, eps[0], eps[1], 5, msg, rbuf)
			if err != nil {
				t.Fatal(err)
			}
			if st != (Status{Source: 0, Tag: 5, Len: n, Count: n}) {
				t.Fatalf("status %+v", st)
			}
			if crc32.ChecksumIEEE(rbuf[:n]) != crc32.ChecksumIEEE(msg) || !bytes.Equal(rbuf[n:], bytes.Repeat([]byte{0xEE}, 16)) {
				t.Fatal("payload differs or bytes past the message were written")
			}
		})
	}
}

func TestTruncation(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 4})
	for _, n := range []int{10, 3000} {
		msg := pattern(n, 1)
		rbuf := make([]byte, 8+4)
		st, err := exchange(t, eps[0], eps[1], 1, msg, rbuf[:8])
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("%d bytes into 8: err %v, want ErrTruncated", n, err)
		}
		if st.Len != n || st.Count != 8 || !bytes.Equal(rbuf[:8], msg[:8]) || !bytes.Equal(rbuf[8:], make([]byte, 4)) {
			t.Fatalf("%d bytes into 8: status %+v, buf %v", n, st, rbuf)
		}
	}
}
