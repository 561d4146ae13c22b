package lmt

// table maps the transfer ids that control packets carry to transfers. An
// id is an index into the table with a generation above it, so that a
// late packet for a transfer that completed finds nothing, not the
// transfer that reuses its index.
type table struct {
	byIndex []*Transfer // nil when free
	gens    []uint32
	free    []uint32
}

func (tb *table) register(t *Transfer) {
	var idx uint32
	if n := len(tb.free); n > 0 {
		idx = tb.free[n-1]
		tb.free = tb.free[:n-1]
	} else {
		idx = uint32(len(tb.byIndex))
		tb.byIndex = append(tb.byIndex, nil)
		tb.gens = append(tb.gens, 0)
	}
	tb.gens[idx]++
	tb.byIndex[idx] = t
	t.id = uint64(tb.gens[idx])<<32 | uint64(idx)
}

func (tb *table) unregister(t *Transfer) {
	idx := uint32(t.id)
	if int(idx) < len(tb.byIndex) && tb.byIndex[idx] == t {
		tb.byIndex[idx] = nil
		tb.free = append(tb.free, idx)
	}
}

func (tb *table) lookup(id uint64) *Transfer {
	idx := uint32(id)
	if int(idx) >= len(tb.byIndex) || tb.gens[idx] != uint32(id>>32) {
		return nil
	}
	return tb.byIndex[idx]
}
