package attach_test

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/internal/iovtest"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// TestIov: Endpoint.Isendv and Irecvv over every backend, with lists on
// both sides, on one side, receives posted first and late (the RTS waiting
// as an unexpected message), and truncation across entry boundaries, at
// sizes below, at and above the eager limit. Above it the message goes by
// the forced backend, and the engine on each side holds the caller's own
// entries: the same memory, not a packed copy.
func TestIov(t *testing.T) {
	for _, b := range all {
		t.Run(b, func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				ep, l, err := join(p, attach.Options{Prefer: []string{b}})
				if err != nil {
					return err
				}
				defer ep.Close()
				defer l.Close()
				sizes := []int{100, attach.DefaultEagerMax, attach.DefaultEagerMax + 1, 1<<20 + 3}
				tag := 0
				for _, n := range sizes {
					for _, s := range iovtest.Shapes {
						r, buf, err := iovtest.Exchange(ep, n, tag, s)
						if err != nil {
							return err
						}
						if err := checkLMT(r, buf, n, s, b); err != nil {
							return fmt.Errorf("rank %d, %d bytes, %v: %w", p.Rank, n, s, err)
						}
						tag++
					}
				}
				return farewell(ep, 1-p.Rank)
			})
		})
	}
}

// checkLMT checks that request r went through the LMT exactly when its
// message was above the eager limit, by backend, moving what the receive
// could hold, and that the engine's transfer was given buf's entries.
func checkLMT(r *nemesis.Request, buf *lmttest.Buffer, n int, s iovtest.Shape, backend string) error {
	st, viaLMT := attach.Stats(r)
	if viaLMT != (n > attach.DefaultEagerMax) {
		return fmt.Errorf("through the LMT: %v, want %v", viaLMT, !viaLMT)
	}
	if !viaLMT {
		return nil
	}
	if st.Backend != backend {
		return fmt.Errorf("stats %+v, want backend %s", st, backend)
	}
	// A sender may have pushed everything early, before the receiver
	// said how much it holds.
	if room := int64(n - s.Short); !r.IsSend() && st.Bytes != room {
		return fmt.Errorf("stats %+v, want %d bytes received", st, room)
	}
	got := attach.Transfer(r).Buffers()
	if len(got) != len(buf.Iov) {
		return fmt.Errorf("engine holds %d entries, the request %d", len(got), len(buf.Iov))
	}
	for i, e := range buf.Iov {
		if len(got[i]) != len(e) || len(e) > 0 && unsafe.SliceData(got[i]) != unsafe.SliceData(e) {
			return fmt.Errorf("engine's entry %d is %d bytes at %p, the caller's %d bytes at %p", i, len(got[i]), unsafe.SliceData(got[i]), len(e), unsafe.SliceData(e))
		}
	}
	return nil
}

// TestIovForcedAndLong: LMT.Isendv forces the backend of one list message;
// and a list with more entries than a CMA handle carries
// (lmt.DefaultMaxSegments) goes by the next backend of the preference
// list, intact, instead of being packed or refused.
func TestIovForcedAndLong(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, l, err := join(p, attach.Options{Prefer: []string{"cma", "pipe"}})
		if err != nil {
			return err
		}
		defer ep.Close()
		defer l.Close()
		const n = 1<<20 + 3
		many := make([]int, 3*lmt.DefaultMaxSegments)
		for i := range many {
			many[i] = n / len(many)
		}
		many[0] += n % len(many)
		cases := []struct {
			lens    []int
			forced  string
			backend string
		}{
			{iovtest.RecvSplits(n), "vmsplice", "vmsplice"},
			{iovtest.RecvSplits(n), "shm", "shm"},
			{many, "", "pipe"},
		}
		for i, c := range cases {
			var r nemesis.Request
			buf := lmttest.NewSplitBuffer(5, c.lens)
			if p.Rank == 0 {
				buf.FillMessage()
				if err := l.Isendv(&r, 1, i, buf.Iov, c.forced); err != nil {
					return err
				}
			} else if err := ep.Irecvv(&r, 0, i, buf.Iov); err != nil {
				return err
			}
			if err := ep.Wait(&r); err != nil {
				return fmt.Errorf("case %d: %w", i, err)
			}
			if st, _ := attach.Stats(&r); st.Backend != c.backend {
				return fmt.Errorf("case %d (%d entries, forced %q): went via %+v, want %s", i, len(c.lens), c.forced, st, c.backend)
			}
			if p.Rank == 1 {
				if err := buf.Verify(n); err != nil {
					return fmt.Errorf("case %d: %w", i, err)
				}
			}
			if err := checkLMT(&r, buf, n, iovtest.Shape{}, c.backend); err != nil {
				return fmt.Errorf("case %d: %w", i, err)
			}
		}
		return farewell(ep, 1-p.Rank)
	})
}
