package auto

import (
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/topology"
)

// placeRanks returns the CPU of every rank, how each was learned, and the
// job's CPUs for DMA_min when every one is known (nil when one is a guess).
func placeRanks(ep *nemesis.Endpoint, given []int) (cpus []int, sources []CPUSource, job []int) {
	n := ep.Size()
	cpus, sources = make([]int, n), make([]CPUSource, n)
	known := true
	for r := range n {
		if given != nil {
			cpus[r], sources[r] = given[r], CPUGiven
			continue
		}
		mask := affinity(ep, r)
		if len(mask) == 1 {
			cpus[r], sources[r] = mask[0], CPUAffinity
			continue
		}
		if len(mask) == 0 {
			mask = affinity(ep, ep.Rank())
		}
		if len(mask) == 0 {
			mask = []int{r} // no mask readable: lmtbench's guess
		}
		// Unpinned: busy processes end up spread over the CPUs they
		// may use, so rank r most likely runs on the r-th.
		cpus[r], sources[r], known = mask[r%len(mask)], CPUGuessed, false
	}
	if known {
		job = cpus
	}
	return cpus, sources, job
}

// affinity returns the CPUs rank's process may run on (topology.Affinity);
// empty when they cannot be read (the process is gone).
func affinity(ep *nemesis.Endpoint, rank int) []int {
	pid := 0
	if rank != ep.Rank() {
		var err error
		if pid, err = ep.PeerPID(rank); err != nil || pid <= 0 {
			return nil
		}
	}
	cpus, _ := topology.Affinity(pid)
	return cpus
}
