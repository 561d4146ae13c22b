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

func TestProbe(t *testing.T) {
	eps := joinLocal(t, 3, &Options{CellSize: 1024, Cells: 4})
	a, c := eps[0], eps[2]
	if _, ok, err := c.Iprobe(AnySource, AnyTag); ok || err != nil {
		t.Fatalf("Iprobe on an empty endpoint: %v, %v", ok, err)
	}
	msg := pattern(3000, 3) // several cells
	var s Request
	if err := a.Isend(&s, 2, 44, msg); err != nil {
		t.Fatal(err)
	}
	if err := eps[1].Send(2, 45, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for range 100 { // c probes while a's cells trickle in
		a.Poll()
		if _, ok, err := c.Iprobe(0, 45); ok || err != nil {
			t.Fatalf("Iprobe(0, 45) matched a message of another source or tag: %v", err)
		}
	}
	st, err := c.Probe(AnySource, 44)
	if err != nil || st != (Status{Source: 0, Tag: 44, Len: 3000}) {
		t.Fatalf("Probe: %+v, %v", st, err)
	}
	st, err = c.Probe(1, AnyTag)
	if err != nil || st != (Status{Source: 1, Tag: 45, Len: 1}) {
		t.Fatalf("Probe(1): %+v, %v", st, err)
	}
	buf := make([]byte, 3000)
	for !s.Done() {
		a.Poll()
		c.Poll()
	}
	if st, err := c.Recv(0, 44, buf); err != nil || st.Count != 3000 || !bytes.Equal(buf, msg) {
		t.Fatalf("Recv after Probe: %+v, %v", st, err)
	}
}

// TestLateReceiveOfArrivingMessage: a multi-cell message that starts
// arriving before its receive is posted (only 4 cells for 10 cells of
// payload) continues straight into the receive buffer once posted, also
// when that buffer is too short.
func TestLateReceiveOfArrivingMessage(t *testing.T) {
	for _, bufLen := range []int{20000, 2500} {
		eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 4})
		a, b := eps[0], eps[1]
		msg := pattern(10*a.CellPayload(), 9)
		var s, r Request
		if err := a.Isend(&s, 1, 0, msg); err != nil {
			t.Fatal(err)
		}
		b.Poll() // the first 4 cells
		a.Poll() // 4 more
		if a := b.peers[0].asm; a.ux == nil || a.got == 0 || a.got == len(msg) {
			t.Fatalf("test setup: message not part-way in (%+v)", a)
		}
		buf := make([]byte, bufLen+8)
		if err := b.Irecv(&r, 0, 0, buf[:bufLen]); err != nil {
			t.Fatal(err)
		}
		for !(s.Done() && r.Done()) {
			a.Poll()
			b.Poll()
		}
		n := min(bufLen, len(msg))
		var wantErr error
		if bufLen < len(msg) {
			wantErr = ErrTruncated
		}
		if !errors.Is(r.err, wantErr) || r.Status().Count != n || !bytes.Equal(buf[:n], msg[:n]) || !bytes.Equal(buf[bufLen:], make([]byte, 8)) {
			t.Fatalf("buffer %d: %+v, %v", bufLen, r.Status(), r.err)
		}
	}
}

func TestSendToSelf(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 2})
	ep := eps[1]
	for _, n := range []int{0, 5, 5000} { // 5000 B: more than the 2 cells
		msg := pattern(n, 1)
		var s Request
		if err := ep.Isend(&s, 1, 3, msg); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, n)
		st, err := ep.Recv(1, 3, buf)
		if err != nil || st.Count != n || !bytes.Equal(buf, msg) {
			t.Fatalf("%d bytes to self: %+v, %v", n, st, err)
		}
		if err := ep.Wait(&s); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNoAllocationPerMessage: once warm, sending and receiving allocates
// nothing, on the fastbox, one-cell and multi-cell paths, whether the
// receive is posted before the message arrives or after, with single
// buffers and with lists (the request keeps the caller's list).
func TestNoAllocationPerMessage(t *testing.T) {
	eps := joinLocal(t, 2, &Options{CellSize: 1024, Cells: 8})
	for _, n := range []int{8, 500, 3000} {
		msg, buf := pattern(n, 2), make([]byte, n)
		msgv := [][]byte{nil, msg[:n/3], {}, msg[n/3:]}
		bufv := [][]byte{buf[:1], buf[1 : n-5], nil, buf[n-5:], nil}
		requireNoAllocs(t, eps[0], eps[1], msg, buf, msgv, bufv, 200, nil)
	}
}

// requireNoAllocs sends msg from a to b's buf runs times, as single
// buffers and as the lists msgv and bufv, with the receive posted first
// and late, and fails the test where a warm message allocates or arrives
// wrong. When sentBy is set, every message must also have gone the way
// it counts.
func requireNoAllocs(t *testing.T, a, b *Endpoint, msg, buf []byte, msgv, bufv [][]byte, runs int, sentBy func() uint64) {
	t.Helper()
	n := len(msg)
	for _, vec := range []bool{false, true} {
		for _, posted := range []bool{true, false} {
			var s, r Request
			recv := func() {
				if vec {
					b.Irecvv(&r, 0, 1, bufv)
				} else {
					b.Irecv(&r, 0, 1, buf)
				}
			}
			one := func() {
				clear(buf)
				if posted {
					recv()
				}
				if vec {
					a.Isendv(&s, 1, 1, msgv)
				} else {
					a.Isend(&s, 1, 1, msg)
				}
				b.Poll()
				if !posted {
					recv()
				}
				for !s.Done() || !r.Done() {
					a.Poll()
					b.Poll()
				}
			}
			one() // warm the unexpected-message pool
			var before uint64
			if sentBy != nil {
				before = sentBy()
			}
			if allocs := testing.AllocsPerRun(runs, one); allocs != 0 {
				t.Errorf("%d bytes, lists %v, receive posted first %v: %v allocations per message", n, vec, posted, allocs)
			}
			if !bytes.Equal(buf, msg) || r.err != nil || s.err != nil || r.Status().Count != n {
				t.Fatalf("%d bytes, lists %v: wrong payload or %v, %v", n, vec, r.err, s.err)
			}
			if sentBy != nil && sentBy()-before != uint64(runs+1) {
				t.Fatalf("%d bytes, lists %v: %d of %d messages went the way asked", n, vec, sentBy()-before, runs+1)
			}
		}
	}
}
