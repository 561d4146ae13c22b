// Command halo solves the heat equation on a 64×64 grid by Jacobi
// iteration, the grid cut into a 2×2 grid of ranks with a halo of one
// cell round each block. Every iteration each rank exchanges its edges
// with its neighbours (rows as they lie, columns packed), with Isend and
// Irecv completed by WaitAll. The top edge of the grid is held at 1, the
// others at 0. Rank 0 gathers the blocks, solves the same grid alone, and
// prints the solution's probes and how far the two differ: not at all,
// since each cell is computed by the same operations in the same order.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

const (
	n     = 64 // the grid is n×n
	pr    = 2  // ranks per side
	b     = n / pr
	iters = 200
)

func main() {
	if p, ok := launch.Self(); ok {
		if err := rank(p); err != nil {
			log.Fatalf("rank %d: %v", p.Rank, err)
		}
		return
	}
	if err := launch.Run(context.Background(), launch.Options{Procs: pr * pr}); err != nil {
		log.Fatal(err)
	}
}

// block is a rank's b×b cells with a halo: (b+2)×(b+2), row-major.
type block struct {
	row, col int // the block's place in the grid of ranks
	cur, nxt []float64
}

func at(i, j int) int { return i*(b+2) + j }

func newBlock(r int) *block {
	k := &block{row: r / pr, col: r % pr, cur: make([]float64, (b+2)*(b+2)), nxt: make([]float64, (b+2)*(b+2))}
	if k.row == 0 { // the grid's top edge, held at 1
		for j := range b + 2 {
			k.cur[at(0, j)], k.nxt[at(0, j)] = 1, 1
		}
	}
	return k
}

func rank(p launch.Proc) error {
	if p.Size != pr*pr {
		return fmt.Errorf("want %d ranks, have %d", pr*pr, p.Size)
	}
	ep, err := knemesis.JoinProc(p, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	k := newBlock(p.Rank)
	var x exchange
	for range iters {
		if err := x.halo(ep, k); err != nil {
			return err
		}
		k.step()
	}
	if p.Rank != 0 {
		return knemesis.Send(ep, 0, 0, k.cur)
	}
	return report(ep, k)
}

// step computes the next iterate of the block's own cells.
func (k *block) step() {
	for i := 1; i <= b; i++ {
		for j := 1; j <= b; j++ {
			k.nxt[at(i, j)] = 0.25 * (k.cur[at(i-1, j)] + k.cur[at(i+1, j)] + k.cur[at(i, j-1)] + k.cur[at(i, j+1)])
		}
	}
	k.cur, k.nxt = k.nxt, k.cur
}

// exchange keeps the requests and column buffers of the halo exchange
// from one iteration to the next.
type exchange struct {
	rs       [8]knemesis.Request
	out, in  [4][]float64 // per direction: up, down, left, right
	prepared bool
}

// halo sends the block's edge cells to its neighbours and receives theirs
// into its halo. Tags name the direction of travel, so that a rank's
// message up meets its upper neighbour's receive from below.
func (x *exchange) halo(ep *knemesis.Endpoint, k *block) error {
	if !x.prepared {
		for d := range 4 {
			x.out[d], x.in[d] = make([]float64, b), make([]float64, b)
		}
		x.prepared = true
	}
	x.rs = [8]knemesis.Request{} // the neighbours missing at the grid's edges stay inactive
	nb := [4]struct{ dr, dc int }{{-1, 0}, {1, 0}, {0, -1}, {0, 1}}
	for d, v := range nb {
		r, c := k.row+v.dr, k.col+v.dc
		if r < 0 || r >= pr || c < 0 || c >= pr {
			continue
		}
		peer := r*pr + c
		k.edge(d, x.out[d])
		if err := knemesis.Irecv(ep, &x.rs[2*d], peer, d^1, x.in[d]); err != nil {
			return err
		}
		if err := knemesis.Isend(ep, &x.rs[2*d+1], peer, d, x.out[d]); err != nil {
			return err
		}
	}
	if err := ep.WaitAll(x.rs[:]); err != nil {
		return err
	}
	for d := range 4 {
		if x.rs[2*d].Done() {
			k.fill(d, x.in[d])
		}
	}
	return nil
}

// cell returns the index of the i-th cell of the block's edge d (own
// cells when own, else the halo beyond them).
func cell(d, i int, own bool) int {
	e := 1
	if !own {
		e = 0
	}
	switch d {
	case 0: // up
		return at(e, i+1)
	case 1: // down
		return at(b+1-e, i+1)
	case 2: // left
		return at(i+1, e)
	default: // right
		return at(i+1, b+1-e)
	}
}

func (k *block) edge(d int, out []float64) {
	for i := range b {
		out[i] = k.cur[cell(d, i, true)]
	}
}

func (k *block) fill(d int, in []float64) {
	for i := range b {
		k.cur[cell(d, i, false)] = in[i]
	}
}

// report gathers every rank's block into the grid, solves the grid alone,
// and prints probes of the solution and the largest difference.
func report(ep *knemesis.Endpoint, own *block) error {
	grid := make([]float64, n*n)
	tmp := make([]float64, (b+2)*(b+2))
	for r := range pr * pr {
		src := own.cur
		if r != 0 {
			if _, err := knemesis.Recv(ep, r, 0, tmp); err != nil {
				return err
			}
			src = tmp
		}
		for i := range b {
			for j := range b {
				grid[(r/pr*b+i)*n+r%pr*b+j] = src[at(i+1, j+1)]
			}
		}
	}
	alone := serial()
	diff := 0.0
	for i := range grid {
		diff = max(diff, abs(grid[i]-alone[i]))
	}
	fmt.Printf("heat on a %dx%d grid, %d Jacobi iterations, %d ranks\n", n, n, iters, pr*pr)
	for _, i := range []int{0, 1, 8, 31, 32, 63} {
		fmt.Printf("row %2d: column 0 %.6f, column 31 %.6f, column 32 %.6f\n", i, grid[i*n], grid[i*n+31], grid[i*n+32])
	}
	fmt.Printf("largest difference from the same grid solved by one rank: %g\n", diff)
	return nil
}

// serial solves the whole grid with the same update.
func serial() []float64 {
	w := n + 2
	cur, nxt := make([]float64, w*w), make([]float64, w*w)
	for j := range w {
		cur[j], nxt[j] = 1, 1
	}
	for range iters {
		for i := 1; i <= n; i++ {
			for j := 1; j <= n; j++ {
				nxt[i*w+j] = 0.25 * (cur[(i-1)*w+j] + cur[(i+1)*w+j] + cur[i*w+j-1] + cur[i*w+j+1])
			}
		}
		cur, nxt = nxt, cur
	}
	out := make([]float64, n*n)
	for i := range n {
		copy(out[i*n:], cur[(i+1)*w+1:(i+1)*w+1+n])
	}
	return out
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
