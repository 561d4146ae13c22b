package datatype

import "fmt"

// Class partitions blocks by length against a threshold, as NewMadeleine
// schedules a derived datatype: small blocks are aggregated (packed into
// one eager packet with the rendezvous requests), large ones are moved in
// place, zero-copy, to their final address.
type Class uint8

const (
	// Small blocks are shorter than the threshold: aggregate them.
	Small Class = iota + 1
	// Large blocks are at least the threshold: move them in place.
	Large
)

func (c Class) String() string {
	switch c {
	case Small:
		return "small"
	case Large:
		return "large"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// selection keeps the blocks of one class; the zero value keeps all.
type selection struct {
	class     Class
	threshold int64
}

func (s selection) all() bool { return s.class == 0 }

func (s selection) takes(n int64) bool {
	switch s.class {
	case Small:
		return n < s.threshold
	case Large:
		return n >= s.threshold
	}
	return true
}

func (s selection) String() string {
	switch s.class {
	case Small:
		return fmt.Sprintf("small (< %d B)", s.threshold)
	case Large:
		return fmt.Sprintf("large (≥ %d B)", s.threshold)
	}
	return "whole"
}

// Select returns a cursor over the blocks of class c only, at the start of
// their stream.
func (t *Type) Select(c Class, threshold int64) Cursor {
	if c != Small && c != Large {
		panic(fmt.Sprintf("datatype: Select of %v: want Small or Large", c))
	}
	return Cursor{t: t, sel: selection{class: c, threshold: threshold}}
}

// Partition counts the blocks and bytes of each class.
type Partition struct {
	SmallBlocks, SmallBytes int64
	LargeBlocks, LargeBytes int64
}

// Classify counts the non-empty blocks shorter than threshold (Small) and
// the others (Large), and their bytes: what an eager packet must hold and
// what is left to move in place.
func (t *Type) Classify(threshold int64) Partition {
	var p Partition
	switch t.kind {
	case kindIndexed:
		for _, n := range t.lens {
			p.add(n, threshold)
		}
	default:
		if t.blocks > 0 {
			p.add(t.blockLen, threshold)
			p.SmallBlocks *= t.blocks
			p.SmallBytes *= t.blocks
			p.LargeBlocks *= t.blocks
			p.LargeBytes *= t.blocks
		}
	}
	return p
}

func (p *Partition) add(n, threshold int64) {
	switch {
	case n == 0:
	case n < threshold:
		p.SmallBlocks++
		p.SmallBytes += n
	default:
		p.LargeBlocks++
		p.LargeBytes += n
	}
}
