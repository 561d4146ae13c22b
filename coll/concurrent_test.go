package coll_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/coll"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// input is rank r's i-th element of case k: every rank computes every
// other's, so that results are checked without an exchange. The values
// spread over 40 binary orders of magnitude, so that a sum in another
// order than the ranks' rounds differently.
func input(k, r, i int) float64 {
	h := uint64(k+1)*0x9e3779b97f4a7c15 ^ uint64(r+1)*0xbf58476d1ce4e5b9 ^ uint64(i+1)*0x94d049bb133111eb
	h ^= h >> 31
	h *= 0xd6e8feb86659fd39
	h ^= h >> 29
	return math.Ldexp(float64(h>>11)/(1<<53)-0.5, int(h%40)-20)
}

func inputs(k, r, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = input(k, r, i)
	}
	return s
}

// sumOf is the rank-order fold by + of the inputs of ranks (job ranks,
// in communicator order).
func sumOf(k int, ranks []int, n int) []float64 {
	acc := inputs(k, ranks[0], n)
	for _, r := range ranks[1:] {
		for i := range acc {
			acc[i] += input(k, r, i)
		}
	}
	return acc
}

func jobRanks(c *coll.Comm) []int {
	s := make([]int, c.Size())
	for i := range s {
		s[i] = c.JobRank(i)
	}
	return s
}

// TestConcurrentCommunicators starts collectives on four communicators
// (the world, its halves, a duplicate, a per-node split) without waiting,
// and waits for them in an order that differs from rank to rank: each
// rank's Wait must advance the others' collectives too.
func TestConcurrentCommunicators(t *testing.T) {
	launchtest.RunOpts(t, 4, launchtest.Options{Timeout: 3 * time.Minute}, func(p launch.Proc) error {
		ep, err := knemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		world := coll.World(ep.Endpoint)
		half, err := world.Split(p.Rank%2, -p.Rank)
		if err != nil {
			return err
		}
		dup, err := world.Dup()
		if err != nil {
			return err
		}
		node, err := world.SplitShared(p.Rank)
		if err != nil {
			return err
		}
		if node.Size() != 4 || node.Rank() != p.Rank {
			return fmt.Errorf("SplitShared on one node: rank %d of %d, want %d of 4", node.Rank(), node.Size(), p.Rank)
		}
		if half.Size() != 2 || half.JobRank(0) != 2+p.Rank%2 {
			return fmt.Errorf("Split by parity, key -rank: rank 0 is job rank %d", half.JobRank(0))
		}
		const big, small = 96 << 10, 16
		a, b := inputs(1, p.Rank, big), make([]float64, big)
		bc := inputs(2, p.Rank, small)
		a2a, a2aOut := inputs(3, p.Rank, 4*small), make([]float64, 4*small)
		nsum := make([]float64, small)
		var reqs []*coll.Request
		for _, start := range []func() (*coll.Request, error){
			func() (*coll.Request, error) { return coll.Iallreduce(half, a, b, coll.Sum[float64]()) },
			func() (*coll.Request, error) { return coll.Ibcast(dup, bc, 3) },
			func() (*coll.Request, error) { return coll.Ibarrier(world) },
			func() (*coll.Request, error) { return coll.Ialltoall(dup, a2a, a2aOut) },
			func() (*coll.Request, error) {
				return coll.Iallreduce(node, inputs(4, p.Rank, small), nsum, coll.Sum[float64]())
			},
		} {
			q, err := start()
			if err != nil {
				return err
			}
			reqs = append(reqs, q)
		}
		for i := range reqs {
			j := i
			if p.Rank%2 == 1 {
				j = len(reqs) - 1 - i
			}
			if err := reqs[j].Wait(); err != nil {
				return fmt.Errorf("collective %d: %w", j, err)
			}
		}
		if err := sameBits("Iallreduce on half", b, sumOf(1, jobRanks(half), big)); err != nil {
			return err
		}
		if err := sameBits("Ibcast on dup", bc, inputs(2, 3, small)); err != nil {
			return err
		}
		for src := range 4 {
			if err := sameBits("Ialltoall on dup", a2aOut[src*small:(src+1)*small], inputs(3, src, 4*small)[p.Rank*small:(p.Rank+1)*small]); err != nil {
				return err
			}
		}
		if err := sameBits("Iallreduce on node", nsum, sumOf(4, jobRanks(node), small)); err != nil {
			return err
		}
		for _, c := range []*coll.Comm{half, dup, node} {
			if err := c.Free(); err != nil {
				return err
			}
		}
		return coll.Barrier(world)
	})
}

// TestScale64 runs the collectives on 64 ranks (oversubscribed here), the
// world and a split of it into three communicators of 22, 21 and 21.
func TestScale64(t *testing.T) {
	const procs = 64
	launchtest.RunOpts(t, procs, launchtest.Options{Timeout: 5 * time.Minute}, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, &nemesis.Options{JoinTimeout: 3 * time.Minute})
		if err != nil {
			return err
		}
		defer ep.Close()
		world := coll.World(ep)
		if err := coll.Barrier(world); err != nil {
			return err
		}
		third, err := world.Split(p.Rank%3, p.Rank)
		if err != nil {
			return err
		}
		for _, c := range []*coll.Comm{world, third} {
			for k, n := range []int{1, 2048} {
				got := make([]float64, n)
				if err := coll.Allreduce(c, inputs(k, p.Rank, n), got, coll.Sum[float64]()); err != nil {
					return err
				}
				if err := sameBits(fmt.Sprintf("Allreduce of %d on %d ranks", n, c.Size()), got, sumOf(k, jobRanks(c), n)); err != nil {
					return err
				}
			}
			bc := inputs(5, p.Rank, 1024)
			if err := coll.Bcast(c, bc, c.Size()-1); err != nil {
				return err
			}
			if err := sameBits("Bcast", bc, inputs(5, c.JobRank(c.Size()-1), 1024)); err != nil {
				return err
			}
			const blk = 4
			out := make([]float64, blk*c.Size())
			if err := coll.Alltoall(c, inputs(6, p.Rank, blk*c.Size()), out); err != nil {
				return err
			}
			for src := range c.Size() {
				w := c.JobRank(src)
				if err := sameBits("Alltoall", out[src*blk:(src+1)*blk], inputs(6, w, blk*c.Size())[c.Rank()*blk:(c.Rank()+1)*blk]); err != nil {
					return err
				}
			}
			scan := make([]float64, 8)
			if err := coll.Scan(c, inputs(7, p.Rank, 8), scan, coll.Sum[float64]()); err != nil {
				return err
			}
			if err := sameBits("Scan", scan, sumOf(7, jobRanks(c)[:c.Rank()+1], 8)); err != nil {
				return err
			}
		}
		return coll.Barrier(world)
	})
}
