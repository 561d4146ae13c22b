// Command allreduce averages a gradient across four ranks, as data-parallel
// training does at every step: each rank computes the gradient of a
// least-squares loss on its own shard of the data, a []float64 of 2^17
// weights (1 MiB), and coll.Allreduce with coll.Sum leaves the sum in
// every rank, bit-identical everywhere (a rank-order fold). Ten steps of
// gradient descent follow; rank 0 prints the loss, and every rank checks,
// with a second allreduce of Min and Max, that all hold the same weights.
package main

import (
	"context"
	"fmt"
	"hash/crc32"
	"log"
	"math"
	"unsafe"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/coll"
	"github.com/knemesis/knemesis/nemesis/launch"
)

const (
	weights = 1 << 17
	shard   = 8 // samples per rank
	steps   = 10
	rate    = 0.1
)

func main() {
	if p, ok := launch.Self(); ok {
		if err := rank(p); err != nil {
			log.Fatalf("rank %d: %v", p.Rank, err)
		}
		return
	}
	if err := launch.Run(context.Background(), launch.Options{Procs: 4}); err != nil {
		log.Fatal(err)
	}
}

func rank(p launch.Proc) error {
	ep, err := knemesis.JoinProc(p, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	world := coll.World(ep) // the endpoint Join returned, as it is
	xs, ys := samples(p.Rank)
	w := make([]float64, weights)
	grad, sum := make([]float64, weights), make([]float64, weights)
	total := float64(p.Size * shard)
	for step := 1; step <= steps; step++ {
		loss := gradient(w, xs, ys, grad)
		if err := coll.Allreduce(world, grad, sum, coll.Sum[float64]()); err != nil {
			return err
		}
		losses := []float64{loss}
		if err := coll.Allreduce(world, losses, losses, coll.Sum[float64]()); err != nil {
			return err
		}
		for i := range w {
			w[i] -= rate * sum[i] / total
		}
		if p.Rank == 0 {
			fmt.Printf("step %2d: mean loss %.6f\n", step, losses[0]/total)
		}
	}
	// The same weights everywhere: the least and greatest CRC agree.
	c := []uint64{uint64(crc32.ChecksumIEEE(unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8*len(w))))}
	lo, hi := make([]uint64, 1), make([]uint64, 1)
	if err := coll.Allreduce(world, c, lo, coll.Min[uint64]()); err != nil {
		return err
	}
	if err := coll.Allreduce(world, c, hi, coll.Max[uint64]()); err != nil {
		return err
	}
	if p.Rank == 0 {
		fmt.Printf("weights: crc32 %08x on every one of %d ranks: %v\n", lo[0], p.Size, lo[0] == hi[0])
	}
	return nil
}

// samples are rank r's shard: sparse inputs, each touching 64 weights,
// and their targets.
func samples(r int) ([][]int, []float64) {
	xs, ys := make([][]int, shard), make([]float64, shard)
	for s := range shard {
		k := r*shard + s
		for j := range 64 {
			xs[s] = append(xs[s], (k*4099+j*2053)%weights)
		}
		ys[s] = math.Sin(float64(k))
	}
	return xs, ys
}

// gradient writes into grad the gradient of the shard's squared error
// at w (inputs of 1 at the indices of xs) and returns the error.
func gradient(w []float64, xs [][]int, ys []float64, grad []float64) float64 {
	clear(grad)
	loss := 0.0
	for s, x := range xs {
		pred := 0.0
		for _, i := range x {
			pred += w[i]
		}
		e := pred - ys[s]
		loss += e * e / 2
		for _, i := range x {
			grad[i] += e
		}
	}
	return loss
}
