package auto

import (
	"time"

	"github.com/knemesis/knemesis/nemesis"
)

// Probing. A VM's topology describes its vCPUs, not where the hypervisor
// runs them: a VM may report one L3 for its two vCPUs whether they sit on
// one core or on two, where a cache line takes several times as long to
// cross and the double copy falls by as much (docs/performance.md). So Attach
// times a cache line between the ranks of each pair
// (nemesis.Endpoint.LineLatency) and hands it to the table
// (threshold.Placement.LineLatency, and Apart when the reading falls in the
// slow one of two regimes this rank has seen), which stops believing a
// shared cache the line does not cross like one. A job started in one placement and
// run in the other is the adaptive selector's to follow within the LMT
// backends; Selection.Reprobe, called by every rank between phases, moves
// the tables and the eager limit too; a short job gets the right start.

const (
	// probeRounds round trips: enough to tell the two placements apart,
	// a fraction of a millisecond either way (docs/performance.md).
	probeRounds = 256
	// defaultProbeTimeout is how long a rank waits for a peer to reach
	// its probe: ranks started by one launcher reach Attach within
	// milliseconds; a peer that never probes (it attached with
	// attach, or NoProbe) costs this once per pair, and the pair is
	// then built from the topology alone.
	defaultProbeTimeout = 100 * time.Millisecond
)

// probePeers measures the one-way cache-line time to every peer into lat,
// by rank, leaving 0 where a peer did not take part. Pairs meet in the
// rounds of a round-robin tournament, so that every rank probes at once
// with a different peer.
func probePeers(ep *nemesis.Endpoint, timeout time.Duration, lat []time.Duration) {
	for _, peer := range probeOrder(ep.Rank(), ep.Size()) {
		if peer < 0 {
			continue // this round's bye
		}
		if d, err := ep.LineLatency(peer, probeRounds, timeout); err == nil {
			lat[peer] = d
		}
	}
}

// probeOrder returns rank me's partner in each round of the circle method
// for n ranks (-1 for a bye): n-1 rounds when n is even, n when odd, every
// pair meeting once and both partners in the same round.
func probeOrder(me, n int) []int {
	m := n + n%2 // an odd job plays against a phantom rank n: the bye
	order := make([]int, 0, m-1)
	for r := range m - 1 {
		var p int
		switch {
		case me == m-1:
			p = r
		case me == r:
			p = m - 1
		default:
			p = ((2*r-me)%(m-1) + (m - 1)) % (m - 1)
		}
		if p >= n {
			p = -1
		}
		order = append(order, p)
	}
	return order
}
