package shm

import "github.com/knemesis/knemesis/lmt"

// Footprint is the shared memory the shm backend takes, from its
// configuration alone: the most the file system allocates for it (fstat's
// blocks; a tmpfs may count fewer, never more), not estimates. A ring's
// file is created Ring+FixedRing bytes long, its fixed slots sparse.
type Footprint struct {
	// Pool is each rank's pool of slots, a memfd allocated in full when
	// its Engine is created (not in /dev/shm).
	Pool uint64
	// Ring is each ordered pair's ring in /dev/shm, allocated when the
	// pair first moves a large message: counters and entries. A pair
	// that moves multirail-shm messages has a second of the same size,
	// the rail's (rail.go), whose pieces take slots of the same pool.
	Ring uint64
	// FixedRing is what a ring adds when its receiver cannot map the
	// sender's pool and the pair uses the ring's own slots.
	FixedRing uint64
}

// FootprintOf returns the footprint of the backend configured by cfg
// (zero fields take their defaults).
func FootprintOf(cfg lmt.Config) Footprint {
	c := cfg.WithDefaults()
	return Footprint{
		Pool:      uint64(poolBytes(c.ShmPoolSlots, c.ShmSlotSize)),
		Ring:      uint64(ringHeaderSize(c.ShmSlots)),
		FixedRing: uint64(c.ShmSlots * c.ShmSlotSize),
	}
}

// Job returns the most a job of n ranks takes when every pair exchanges
// large messages through pools: n pools and n(n-1) rings.
func (f Footprint) Job(n int) uint64 { return uint64(n)*f.Pool + uint64(n)*uint64(n-1)*f.Ring }
