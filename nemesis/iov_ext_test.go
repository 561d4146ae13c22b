package nemesis_test

import (
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/internal/iovtest"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// TestIovEager: lists on either or both sides through the fastbox, one cell
// and many cells (no LMT: every size is eager), received posted first and
// late (from the unexpected-message buffer), and truncated across entry
// boundaries, between two processes.
func TestIovEager(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		fb, cell := ep.FastboxPayload(), ep.CellPayload()
		sizes := []int{0, 1, fb - 1, fb, fb + 1, cell, cell + 1, 3*cell + 5, 64 << 10, 64<<10 + 1}
		tag := 0
		for _, n := range sizes {
			for _, s := range iovtest.Shapes {
				if _, _, err := iovtest.Exchange(ep, n, tag, s); err != nil {
					return err
				}
				tag++
			}
		}
		st := ep.Stats()
		if p.Rank == 0 && (st.FastboxMsgs == 0 || st.QueueMsgs == 0 || st.RTS != 0) {
			return fmt.Errorf("stats %+v: want messages through the fastbox and the queue, none by rendezvous", st)
		}
		// Neither rank leaves before the other is done.
		if p.Rank == 0 {
			_, err = ep.Recv(1, 0, nil)
			return err
		}
		return ep.Send(0, 0, nil)
	})
}
