package attach_test

import (
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// TestArenaRoute: a message from the shared arena goes by the endpoint's
// own single copy (a descriptor, no LMT transfer) when nothing is forced;
// by the LMT's arena backend when the preference names it; and by the
// backend an Isend forces on it. Each arrives intact.
func TestArenaRoute(t *testing.T) {
	for _, c := range []struct {
		name    string
		prefer  []string
		forced  string // LMT.Isend's backend
		backend string // the LMT backend that must carry it; "" for the descriptor
	}{
		{"descriptor", nil, "", ""},
		{"prefer-arena", []string{lmt.Arena}, "", lmt.Arena},
		{"forced-cma", nil, lmt.CMA, lmt.CMA},
	} {
		t.Run(c.name, func(t *testing.T) {
			launchtest.Run(t, 2, func(p launch.Proc) error {
				ep, err := nemesis.JoinProc(p, &nemesis.Options{ArenaSize: 1 << 20})
				if err != nil {
					return err
				}
				defer ep.Close()
				l, err := attach.Attach(ep, attach.Options{Prefer: c.prefer})
				if err != nil {
					return err
				}
				defer l.Close()
				const n = 16 << 10
				var r nemesis.Request
				if p.Rank == 0 {
					b, err := ep.Alloc(n)
					if err != nil {
						return err
					}
					copy(b, lmttest.Message(n, 5))
					if c.forced != "" {
						err = l.Isend(&r, 1, 5, b, c.forced)
					} else {
						err = ep.Isend(&r, 1, 5, b)
					}
					if err == nil {
						err = ep.Wait(&r)
					}
					if err != nil {
						return err
					}
				} else {
					buf := make([]byte, n)
					if err := ep.Irecv(&r, 0, 5, buf); err != nil {
						return err
					}
					if err := ep.Wait(&r); err != nil {
						return err
					}
					if crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(lmttest.Message(n, 5)) {
						return fmt.Errorf("%d bytes arrived, content differs", n)
					}
				}
				st, viaLMT := attach.Stats(&r)
				es := ep.Stats()
				arena := es.ArenaSends + es.ArenaRecvs
				switch {
				case c.backend == "" && (viaLMT || arena != 1):
					return fmt.Errorf("rank %d: via the LMT %v (%+v), endpoint stats %+v; want the descriptor", p.Rank, viaLMT, st, es)
				case c.backend != "" && (!viaLMT || st.Backend != c.backend || arena != 0):
					return fmt.Errorf("rank %d: via the LMT %v (%+v), endpoint stats %+v; want the %s backend", p.Rank, viaLMT, st, es, c.backend)
				}
				return farewell(ep, 1-p.Rank)
			})
		})
	}
}
