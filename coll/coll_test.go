package coll_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/coll"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// refTag is the application tag of the naive reference's messages.
const refTag = 77

// exchange is the naive reference's transport: every rank of c sends
// mine to every other by plain Send/Recv on the endpoint, and gets each
// rank's bytes, its own included, in rank order.
func exchange(c *coll.Comm, mine []byte) ([][]byte, error) {
	ep := c.Endpoint()
	n, r := c.Size(), c.Rank()
	all := make([][]byte, n)
	all[r] = slices.Clone(mine)
	sends := make([]nemesis.Request, n)
	for j := range n {
		if j != r {
			if err := ep.Isend(&sends[j], c.JobRank(j), refTag, mine); err != nil {
				return nil, err
			}
		}
	}
	for j := range n {
		if j == r {
			continue
		}
		st, err := ep.Probe(c.JobRank(j), refTag)
		if err != nil {
			return nil, err
		}
		all[j] = make([]byte, st.Len)
		if _, err := ep.Recv(c.JobRank(j), refTag, all[j]); err != nil {
			return nil, err
		}
	}
	for j := range n {
		if j != r {
			if err := ep.Wait(&sends[j]); err != nil {
				return nil, err
			}
		}
	}
	return all, nil
}

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

func elemsOf[T any](b []byte) []T {
	var z T
	out := make([]T, len(b)/int(unsafe.Sizeof(z)))
	copy(bytesOf(out), b)
	return out
}

// exchangeOf is exchange for a typed slice.
func exchangeOf[T any](c *coll.Comm, mine []T) ([][]T, error) {
	all, err := exchange(c, bytesOf(mine))
	if err != nil {
		return nil, err
	}
	out := make([][]T, len(all))
	for i, b := range all {
		out[i] = elemsOf[T](b)
	}
	return out, nil
}

// leftFold is the reference reduction: parts folded in rank order.
func leftFold[T any](parts [][]T, f func(a, b T) T) []T {
	acc := slices.Clone(parts[0])
	for _, p := range parts[1:] {
		for i := range acc {
			acc[i] = f(acc[i], p[i])
		}
	}
	return acc
}

func sameBits[T any](what string, got, want []T) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d elements, want %d", what, len(got), len(want))
	}
	g, w := bytesOf(got), bytesOf(want)
	for i := range g {
		if g[i] != w[i] {
			var z T
			e := i / int(unsafe.Sizeof(z))
			return fmt.Errorf("%s: element %d of %d is %v, want %v (bit for bit)", what, e, len(got), got[e], want[e])
		}
	}
	return nil
}

func randFloats(rng *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = (rng.Float64() - 0.5) * math.Ldexp(1, rng.IntN(40)-20)
	}
	return s
}

func randInts(rng *rand.Rand, n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = rng.Int64()
	}
	return s
}

// nonCommutative is a user reduction whose result depends on the order:
// only the rank-order fold gives the reference's value.
var nonCommutative = func(a, b int64) int64 { return a*3 + b }

// checkAll runs every operation on c with k elements per rank (blocks of
// kb elements for the all-to-all shapes) and compares each result with
// the naive reference, bit for bit.
func checkAll(c *coll.Comm, k, kb int, seed uint64) error {
	n, r := c.Size(), c.Rank()
	rng := rand.New(rand.NewPCG(seed, uint64(r)))
	x := randFloats(rng, k)
	xi := randInts(rng, k)
	blocks := randFloats(rng, n*kb)
	all, err := exchangeOf(c, x)
	if err != nil {
		return err
	}
	alli, err := exchangeOf(c, xi)
	if err != nil {
		return err
	}
	allb, err := exchangeOf(c, blocks)
	if err != nil {
		return err
	}
	sum := func(a, b float64) float64 { return a + b }
	wantSum := leftFold(all, sum)

	got := make([]float64, k)
	if err := coll.Allreduce(c, x, got, coll.Sum[float64]()); err != nil {
		return err
	}
	if err := sameBits("Allreduce Sum", got, wantSum); err != nil {
		return err
	}
	inPlace := slices.Clone(x)
	if err := coll.Allreduce(c, inPlace, inPlace, coll.Sum[float64]()); err != nil {
		return err
	}
	if err := sameBits("Allreduce Sum in place", inPlace, wantSum); err != nil {
		return err
	}
	user := coll.NewOp("3a+b", func(acc, in []int64) {
		for i := range acc {
			acc[i] = nonCommutative(acc[i], in[i])
		}
	})
	gotI := make([]int64, k)
	if err := coll.Allreduce(c, xi, gotI, user); err != nil {
		return err
	}
	if err := sameBits("Allreduce user op", gotI, leftFold(alli, nonCommutative)); err != nil {
		return err
	}
	for _, o := range []struct {
		op coll.Op[int64]
		f  func(a, b int64) int64
	}{
		{coll.Max[int64](), func(a, b int64) int64 { return max(a, b) }},
		{coll.Min[int64](), func(a, b int64) int64 { return min(a, b) }},
		{coll.BXor[int64](), func(a, b int64) int64 { return a ^ b }},
		{coll.BAnd[int64](), func(a, b int64) int64 { return a & b }},
		{coll.BOr[int64](), func(a, b int64) int64 { return a | b }},
		{coll.Prod[int64](), func(a, b int64) int64 { return a * b }},
		{coll.LOr[int64](), func(a, b int64) int64 { return b2i(a != 0 || b&1 != 0) }},
	} {
		in := xi
		if o.op.Name() == "LOr" {
			in = make([]int64, k)
			for i := range in {
				in[i] = xi[i] & 1
			}
		}
		if err := coll.Allreduce(c, in, gotI, o.op); err != nil {
			return err
		}
		ref := alli
		if o.op.Name() == "LOr" {
			ref = make([][]int64, n)
			for j := range ref {
				ref[j] = make([]int64, k)
				for i := range ref[j] {
					ref[j][i] = alli[j][i] & 1
				}
			}
		}
		if err := sameBits("Allreduce "+o.op.Name(), gotI, leftFold(ref, o.f)); err != nil {
			return err
		}
	}

	root := n - 1
	gotR := make([]int64, k)
	if err := coll.Reduce(c, xi, gotR, user, root); err != nil {
		return err
	}
	if r == root {
		if err := sameBits("Reduce user op", gotR, leftFold(alli, nonCommutative)); err != nil {
			return err
		}
	}

	bc := slices.Clone(x)
	broot := n / 2
	if err := coll.Bcast(c, bc, broot); err != nil {
		return err
	}
	if err := sameBits("Bcast", bc, all[broot]); err != nil {
		return err
	}

	cat := slices.Concat(all...)
	gath := make([]float64, n*k)
	if err := coll.Gather(c, x, gath, 0); err != nil {
		return err
	}
	if r == 0 {
		if err := sameBits("Gather", gath, cat); err != nil {
			return err
		}
	}
	ag := make([]float64, n*k)
	if err := coll.Allgather(c, x, ag); err != nil {
		return err
	}
	if err := sameBits("Allgather", ag, cat); err != nil {
		return err
	}
	agIn := make([]float64, n*k)
	copy(agIn[r*k:], x)
	if err := coll.Allgather(c, agIn[r*k:(r+1)*k], agIn); err != nil {
		return err
	}
	if err := sameBits("Allgather in place", agIn, cat); err != nil {
		return err
	}

	// v forms: rank j contributes its first counts[j] elements.
	counts, displs := make([]int, n), make([]int, n)
	total := 0
	for j := range n {
		counts[j], displs[j] = k-k*j/(2*n), total
		total += counts[j]
	}
	var vcat []float64
	for j := range n {
		vcat = append(vcat, all[j][:counts[j]]...)
	}
	agv := make([]float64, total)
	if err := coll.Allgatherv(c, x[:counts[r]], agv, counts, displs); err != nil {
		return err
	}
	if err := sameBits("Allgatherv", agv, vcat); err != nil {
		return err
	}
	gv := make([]float64, total)
	if err := coll.Gatherv(c, x[:counts[r]], gv, counts, displs, root); err != nil {
		return err
	}
	if r == root {
		if err := sameBits("Gatherv", gv, vcat); err != nil {
			return err
		}
	}
	sv := make([]float64, counts[r])
	if err := coll.Scatterv(c, vcat, counts, displs, sv, 0); err != nil {
		return err
	}
	if err := sameBits("Scatterv", sv, all[r][:counts[r]]); err != nil {
		return err
	}

	sc := make([]float64, kb)
	if err := coll.Scatter(c, blocks, sc, broot); err != nil {
		return err
	}
	if err := sameBits("Scatter", sc, allb[broot][r*kb:(r+1)*kb]); err != nil {
		return err
	}
	a2a := make([]float64, n*kb)
	if err := coll.Alltoall(c, blocks, a2a); err != nil {
		return err
	}
	var want []float64
	for j := range n {
		want = append(want, allb[j][r*kb:(r+1)*kb]...)
	}
	if err := sameBits("Alltoall", a2a, want); err != nil {
		return err
	}
	// Alltoallv: rank s sends rank d cnt(s, d) elements of its block d.
	cnt := func(s, d int) int { return min(kb, kb/2+(s+2*d)%3) }
	sc2, sd2, rc2, rd2 := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
	for j := range n {
		sc2[j], sd2[j], rc2[j], rd2[j] = cnt(r, j), j*kb, cnt(j, r), j*kb
	}
	a2av := make([]float64, n*kb)
	if err := coll.Alltoallv(c, blocks, sc2, sd2, a2av, rc2, rd2); err != nil {
		return err
	}
	wantv := make([]float64, n*kb)
	for j := range n {
		copy(wantv[j*kb:], allb[j][r*kb:r*kb+cnt(j, r)])
	}
	if err := sameBits("Alltoallv", a2av, wantv); err != nil {
		return err
	}
	rs := make([]float64, kb)
	rsCounts := make([]int, n)
	for j := range rsCounts {
		rsCounts[j] = kb
	}
	if err := coll.ReduceScatter(c, blocks, rs, rsCounts, coll.Sum[float64]()); err != nil {
		return err
	}
	if err := sameBits("ReduceScatter", rs, leftFold(allb, sum)[r*kb:(r+1)*kb]); err != nil {
		return err
	}

	scan := make([]float64, k)
	if err := coll.Scan(c, x, scan, coll.Sum[float64]()); err != nil {
		return err
	}
	if err := sameBits("Scan", scan, leftFold(all[:r+1], sum)); err != nil {
		return err
	}
	ex := slices.Clone(x)
	if err := coll.Exscan(c, ex, ex, coll.Sum[float64]()); err != nil {
		return err
	}
	wantEx := x
	if r > 0 {
		wantEx = leftFold(all[:r], sum)
	}
	if err := sameBits("Exscan in place", ex, wantEx); err != nil {
		return err
	}
	return coll.Barrier(c)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// sizeClasses are the element counts of float64 checked: 8 B (a line
// record, the shared lines), 1 KiB (a fastbox), 64 KiB (cells or the
// LMT), 1 MiB (the LMT), and on communicators of up to 3 ranks 3 MiB; the
// all-to-all shapes keep each rank's n blocks within 1 MiB.
var sizeClasses = []int{1, 128, 8 << 10, 128 << 10}

const bigClass, bigRanks = 384 << 10, 3

func blockFor(k, n int) int { return max(1, min(k, (128<<10)/n)) }

// TestAgainstReference splits an 8-rank job into communicators of every
// size from 1 to 8 (each split's groups running side by side) and checks
// every operation at every size class against the naive reference.
func TestAgainstReference(t *testing.T) {
	partitions := [][]int{{8}, {5, 3}, {7, 1}, {6, 2}, {4, 4}}
	launchtest.RunOpts(t, 8, launchtest.Options{Timeout: 10 * time.Minute}, func(p launch.Proc) error {
		ep, err := knemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		world := coll.World(ep.Endpoint)
		for pi, part := range partitions {
			color, key, start := 0, 0, 0
			for g, size := range part {
				if p.Rank >= start && p.Rank < start+size {
					color, key = g, (start+size-1)-p.Rank // reversed: ranks renumbered
				}
				start += size
			}
			c, err := world.Split(color, key)
			if err != nil {
				return err
			}
			if want := part[color]; c.Size() != want || c.Rank() != key {
				return fmt.Errorf("partition %v: rank %d got a communicator of %d as its rank %d, want %d as %d", part, p.Rank, c.Size(), c.Rank(), want, key)
			}
			sizes := sizeClasses
			if c.Size() <= bigRanks {
				sizes = append(sizes[:len(sizes):len(sizes)], bigClass)
			}
			for _, k := range sizes {
				if err := checkAll(c, k, blockFor(k, c.Size()), uint64(pi*100+k)); err != nil {
					return fmt.Errorf("communicator of %d (partition %v), %d elements: %w", c.Size(), part, k, err)
				}
			}
			if err := c.Free(); err != nil {
				return err
			}
		}
		return coll.Barrier(world)
	})
}
