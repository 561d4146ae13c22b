package topology

// Pairs picks the CPU pairs `lmtbench tune` measures: one that shares a
// cache and one that does not, each present only when the machine has
// such a pair. The sharing pair shares as few cache levels as possible
// (two cores behind one L3 rather than two SMT threads of one core), as MPI
// ranks are usually placed one per core.
func (t *Topology) Pairs() (shared, unshared [2]int, hasShared, hasUnshared bool) {
	if len(t.CPUs) < 2 {
		return
	}
	a := t.CPUs[0]
	fewest := 0
	for _, b := range t.CPUs[1:] {
		n := 0
		for _, c := range t.Caches {
			if c.HoldsData() && c.CPUs.Contains(a) && c.CPUs.Contains(b) {
				n++
			}
		}
		switch {
		case n == 0 && !hasUnshared:
			unshared, hasUnshared = [2]int{a, b}, true
		case n > 0 && (!hasShared || n < fewest):
			shared, hasShared, fewest = [2]int{a, b}, true, n
		}
	}
	return
}
