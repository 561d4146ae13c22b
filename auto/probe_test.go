package auto

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/threshold"
)

// TestProbeOrder: in every round each rank's partner names it back, and
// over the rounds each rank meets every other exactly once.
func TestProbeOrder(t *testing.T) {
	for n := 1; n <= 9; n++ {
		orders := make([][]int, n)
		for me := range n {
			orders[me] = probeOrder(me, n)
		}
		rounds := len(orders[0])
		if want := n - 1 + n%2; n > 1 && rounds != want {
			t.Errorf("n=%d: %d rounds, want %d", n, rounds, want)
		}
		for me, o := range orders {
			var met []int
			for r, p := range o {
				if p < 0 {
					continue
				}
				if p == me || p >= n || orders[p][r] != me {
					t.Errorf("n=%d round %d: rank %d meets %d, who meets %d", n, r, me, p, orders[p][r])
				}
				met = append(met, p)
			}
			slices.Sort(met)
			if len(met) != n-1 || len(slices.Compact(slices.Clone(met))) != n-1 {
				t.Errorf("n=%d: rank %d meets %v", n, me, met)
			}
		}
	}
}

// TestProbeReachesTable: with this machine's own caches, each rank of a
// pair times the cache line to the other, the table gets that time, and
// the pair counts as sharing a cache exactly when the topology says so and
// the line is not in the slow one of two regimes this rank measured. A rank that does not
// probe leaves its pairs measured 0 (topology alone) after the others'
// timeout, and the two that probe still measure each other.
func TestProbeReachesTable(t *testing.T) {
	launchtest.Run(t, 3, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		// Rank 0 does not probe, so 1 and 2 meet in the first round
		// (probeOrder) and each waits out the timeout on rank 0 only
		// after. The timeout covers the meeting and the 256 round trips:
		// long, since on a machine loaded by other tests the two may
		// start seconds apart and seldom run at once.
		o := Options{Threshold: threshold.Config{TuningPath: filepath.Join(t.TempDir(), "none.json")}, NoProbe: p.Rank == 0, ProbeTimeout: 15 * time.Second}
		sel, err := Attach(ep, o)
		if err != nil {
			return err
		}
		defer sel.Close()
		for peer := range 3 {
			if peer == p.Rank {
				continue
			}
			pair := sel.Pair(peer)
			lat, table := pair.Placement.LineLatency, pair.Info.Table
			measured := p.Rank != 0 && peer != 0
			if measured != (lat > 0) || table.LineLatency != lat {
				return fmt.Errorf("pair %d→%d: line %v, table's %v; measured %v", p.Rank, peer, lat, table.LineLatency, measured)
			}
			_, topo := pair.Info.Topology.SharedCache(pair.Placement.Sender, pair.Placement.Receiver)
			if want := topo && !sel.Regimes().Far(lat); table.Shared != want || pair.Placement.Apart != sel.Regimes().Far(lat) {
				return fmt.Errorf("pair %d→%d: line %v, topology shared %v, table shared %v", p.Rank, peer, lat, topo, table.Shared)
			}
			var out strings.Builder
			if err := pair.Info.Describe(&out); err != nil {
				return err
			}
			if strings.Contains(out.String(), "(measured)") != measured {
				return fmt.Errorf("pair %d→%d: Describe says measured %v:\n%s", p.Rank, peer, !measured, out.String())
			}
		}
		return nil
	})
}

// TestLearnRegimes: a rank files a reading far only once its readings show
// two regimes, two readings each at least, and forgets the oldest past
// maxReadings: the machine of now decides.
func TestLearnRegimes(t *testing.T) {
	ns := time.Nanosecond
	s := &Selection{}
	for i, c := range []struct {
		lat []time.Duration // by rank; 0 for the own rank
		two bool
	}{
		{[]time.Duration{0, 50 * ns}, false},
		{[]time.Duration{0, 55 * ns}, false},
		{[]time.Duration{0, 2000 * ns}, false}, // one slow reading is no regime
		{[]time.Duration{0, 2100 * ns}, true},
	} {
		s.learnRegimes(c.lat)
		if r := s.Regimes(); r.Two != c.two || r.N != i+1 {
			t.Fatalf("after %d readings: %s, want two regimes %v", i+1, r, c.two)
		}
	}
	if r := s.Regimes(); !r.Far(2000*ns) || r.Far(55*ns) {
		t.Fatalf("%s: want 2 µs far, 55 ns near", r)
	}
	for range maxReadings - 2 {
		s.learnRegimes([]time.Duration{0, 2000 * ns})
	}
	if r := s.Regimes(); r.Two || r.N != maxReadings || r.Far(2000*ns) {
		t.Fatalf("after %d slow readings: %s, want one regime of the latest %d", maxReadings-2, r, maxReadings)
	}
}
