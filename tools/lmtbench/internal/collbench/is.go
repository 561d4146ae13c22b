package collbench

import "fmt"

// The IS-like kernel: the integer sort of the NAS Parallel Benchmarks in
// miniature, the application on which Buntinas, Goglin, Goodell, Mercier
// and Moreaud ("Cache-Efficient, Intranode, Large-Message MPI
// Communication with MPICH2-Nemesis", ICPP 2009, §4.4) saw KNEM's largest
// gain after IMB's Alltoall. Each rank generates its keys from a fixed
// seed; one timed iteration buckets them by key range (rank r owns the
// keys k with k·n>>isKeyBits == r), exchanges the bucket sizes with an
// Alltoall and the keys with an Alltoallv, and sorts what it received by
// counting. After the timed iterations every rank checks its keys are in
// order and in its range, and the order-independent checksum of all keys
// after the sort must equal that of all keys generated: together, the
// keys are a permutation of the generated ones, sorted across the job.
// mpi/coll.c does the same, step for step, with the same generator, so
// that both sides sort the same keys (Run compares their checksums).
const (
	isKeyBits = 16 // keys in [0, 2^16)
	isSeed    = 0x5eed1e55
)

// isKeys returns count keys of rank: each the mean of four 16-bit draws of
// splitmix64, as NAS IS averages four uniform draws, so that the keys
// cluster in the middle of the range and the buckets differ in size.
func isKeys(rank, count int) []uint32 {
	keys := make([]uint32, count)
	s := uint64(isSeed) ^ uint64(rank+1)*0x9e3779b97f4a7c15
	for i := range keys {
		s += 0x9e3779b97f4a7c15
		z := mix64(s)
		keys[i] = uint32((z&0xffff + z>>16&0xffff + z>>32&0xffff + z>>48) >> 2)
	}
	return keys
}

// mix64 is splitmix64's finalizer: the generator's output, and the hash
// of each key in the checksum.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// isChecksum is the sum of the keys' hashes modulo 2^64: independent of
// their order, and of the rank that holds them, so the sum over ranks
// before the exchange equals the sum after it unless a key was lost,
// duplicated or changed.
func isChecksum(keys []uint32) uint64 {
	var sum uint64
	for _, k := range keys {
		sum += mix64(uint64(k) + 1)
	}
	return sum
}

// isOwner is the rank of n that owns key.
func isOwner(key uint32, n int) int { return int(uint64(key) * uint64(n) >> isKeyBits) }

// isRange is rank r's keys: [lo, hi).
func isRange(r, n int) (lo, hi uint32) {
	first := func(r int) uint32 { return uint32((uint64(r)<<isKeyBits + uint64(n) - 1) / uint64(n)) }
	return first(r), first(r + 1)
}

// isState is one rank's buffers, made once: an iteration allocates
// nothing.
type isState struct {
	rank, n    int
	keys       []uint32 // generated
	send       []uint32 // keys by destination
	recv       []uint32 // keys received, n·len(keys) at most
	sorted     []uint32
	scount     []int32 // keys to each rank
	rcount     []int32 // keys from each rank
	sc, sd     []int   // send counts and displacements, as Alltoallv takes them
	rc, rd     []int
	cursor     []int
	bins       []int // counting sort, one per key of this rank's range
	lo, hi     uint32
	nrecv      int
	sumBefore  uint64 // this rank's generated keys' checksum
	generated  int
	sortedKeys int
}

func newIS(rank, n, bytes int) *isState {
	count := max(bytes/4, 1)
	s := &isState{rank: rank, n: n, keys: isKeys(rank, count), generated: count}
	s.send = make([]uint32, count)
	s.recv = make([]uint32, n*count)
	s.sorted = make([]uint32, n*count)
	s.scount, s.rcount = make([]int32, n), make([]int32, n)
	s.sc, s.sd, s.rc, s.rd, s.cursor = make([]int, n), make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	s.lo, s.hi = isRange(rank, n)
	s.bins = make([]int, s.hi-s.lo)
	s.sumBefore = isChecksum(s.keys)
	return s
}

// bucket counts the keys for each rank and lays them out by rank in send.
func (s *isState) bucket() {
	clear(s.scount)
	for _, k := range s.keys {
		s.scount[isOwner(k, s.n)]++
	}
	off := 0
	for d, c := range s.scount {
		s.sc[d], s.sd[d], s.cursor[d] = int(c), off, off
		off += int(c)
	}
	for _, k := range s.keys {
		d := isOwner(k, s.n)
		s.send[s.cursor[d]] = k
		s.cursor[d]++
	}
}

// received sets the receive counts and displacements from rcount, which
// the Alltoall filled: peer-written numbers, checked before use.
func (s *isState) received() error {
	off := 0
	for r, c := range s.rcount {
		if c < 0 || off+int(c) > len(s.recv) {
			return fmt.Errorf("is: rank %d says it sends %d keys to rank %d, which has room for %d more", r, c, s.rank, len(s.recv)-off)
		}
		s.rc[r], s.rd[r] = int(c), off
		off += int(c)
	}
	s.nrecv = off
	return nil
}

// sort sorts the received keys into sorted by counting them in this
// rank's range; a key outside it is an error naming the key.
func (s *isState) sort() error {
	clear(s.bins)
	in := s.recv[:s.nrecv]
	for _, k := range in {
		if k < s.lo || k >= s.hi {
			return fmt.Errorf("is: rank %d received key %d, outside its range [%d, %d)", s.rank, k, s.lo, s.hi)
		}
		s.bins[k-s.lo]++
	}
	out := s.sorted[:0]
	for i, c := range s.bins {
		for range c {
			out = append(out, s.lo+uint32(i))
		}
	}
	s.sortedKeys = len(out)
	return nil
}

// verifyLocal checks that this rank's sorted keys are in order and in its
// range, and returns their checksum, for the global comparison.
func (s *isState) verifyLocal() (uint64, error) {
	out := s.sorted[:s.sortedKeys]
	for i, k := range out {
		if k < s.lo || k >= s.hi {
			return 0, fmt.Errorf("is: rank %d's sorted key %d is %d, outside its range [%d, %d)", s.rank, i, k, s.lo, s.hi)
		}
		if i > 0 && k < out[i-1] {
			return 0, fmt.Errorf("is: rank %d's sorted keys %d and %d are %d and %d, out of order", s.rank, i-1, i, out[i-1], k)
		}
	}
	return isChecksum(out), nil
}

// isVerifyGlobal compares the job's sums: the keys and their checksum
// before the exchange and after the sort.
func isVerifyGlobal(keysBefore, keysAfter int64, sumBefore, sumAfter uint64) error {
	if keysBefore != keysAfter {
		return fmt.Errorf("is: the ranks generated %d keys and hold %d after the sort", keysBefore, keysAfter)
	}
	if sumBefore != sumAfter {
		return fmt.Errorf("is: the checksum of the keys is %#x before the exchange and %#x after the sort: a key was changed", sumBefore, sumAfter)
	}
	return nil
}
