package attach_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/internal/jobtest"
	"github.com/knemesis/knemesis/nemesis"
)

// TestTypedNoAllocWithArena: two endpoints of this process, with an
// arena and attach's LMT, exchange 72,000 bytes between a plain buffer
// and blocks: 9 blocks to the buffer (cma pulls them), and the buffer to
// 6,000 blocks of 12 bytes, whose description no CTS holds (shm walks
// them). In steady state a message allocates nothing on either side (no
// backend tried and refused with an error on the way: a typed send was
// sent to the arena backend first, its Iov being nil, which InArena took
// for a list all in the arena), and the bytes arrive.
func TestTypedNoAllocWithArena(t *testing.T) {
	type rank struct {
		ep *nemesis.Endpoint
		l  *attach.LMT
	}
	rs := jobtest.InProcess(t, 2, func(job string, r int) (rank, error) {
		ep, err := nemesis.Join(job, r, 2, &nemesis.Options{ArenaSize: 1 << 20})
		if err != nil {
			return rank{}, err
		}
		l, err := attach.Attach(ep, attach.Options{})
		return rank{ep, l}, err
	}, func(r rank) {
		if r.l != nil {
			r.l.Close()
		}
		if r.ep != nil {
			r.ep.Close()
		}
	})
	eps := [2]*nemesis.Endpoint{rs[0].ep, rs[1].ep}
	lens, disps := make([]int64, 6000), make([]int64, 6000)
	for i := range lens {
		lens[i], disps[i] = 12, int64(i)*16+int64(i%3)
	}
	long, err := datatype.Indexed(lens, disps)
	if err != nil {
		t.Fatal(err)
	}
	short, err := datatype.Indexed([]int64{100, 8000, 8000, 8000, 8000, 8000, 8000, 8000, 15900},
		[]int64{0, 200, 8300, 16400, 24500, 32600, 40700, 48800, 56900})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		typed   int // the rank whose side is the description
		typ     *datatype.Type
		backend string
	}{{"9 blocks to buffer", 0, short, "cma"}, {"buffer to 6000 blocks", 1, long, "shm"}} {
		t.Run(c.name, func(t *testing.T) {
			typ := c.typ
			base, buf := make([]byte, typ.Extent()), make([]byte, typ.Size())
			for i := range base {
				base[i] = byte(i * 7)
			}
			for i := range buf {
				buf[i] = byte(i * 5)
			}
			var s, r nemesis.Request
			var err error
			round := func() {
				if c.typed == 0 {
					err = errors.Join(err, eps[1].Irecv(&r, 0, 1, buf), eps[0].IsendType(&s, 1, 1, base, typ))
				} else {
					err = errors.Join(err, eps[1].IrecvType(&r, 0, 1, base, typ), eps[0].Isend(&s, 1, 1, buf))
				}
				for err == nil && (!s.Done() || !r.Done()) {
					_, e1 := eps[1].Test(&r)
					_, e0 := eps[0].Test(&s)
					err = errors.Join(e0, e1)
				}
				_, e0 := eps[0].Test(&s) // done: its error, no poll
				_, e1 := eps[1].Test(&r)
				err = errors.Join(err, e0, e1)
				if st, ok := attach.Stats(&r); !ok || st.Backend != c.backend {
					err = errors.Join(err, fmt.Errorf("received via %q (%v), want %s", st.Backend, ok, c.backend))
				}
			}
			round()
			allocs := testing.AllocsPerRun(20, round)
			if err != nil {
				t.Fatal(err)
			}
			if allocs != 0 {
				t.Errorf("%v allocations per message", allocs)
			}
			packed := make([]byte, typ.Size())
			typ.Pack(packed, base)
			if !bytes.Equal(packed, buf) {
				t.Error("the blocks and the buffer differ")
			}
		})
	}
}
