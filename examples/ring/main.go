// Command ring passes messages round a ring of four ranks: a token that
// each rank adds its rank to, three laps; then each rank's 1 MiB block of
// float64, shifted right with Sendrecv until every rank has seen every
// block (a ring allgather), large enough to go by the LMT. Rank 0 prints
// what it saw.
package main

import (
	"context"
	"fmt"
	"hash/crc32"
	"log"
	"math"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

const (
	laps     = 3
	blockLen = 1 << 17 // float64s: 1 MiB
	tagToken = 1
	tagBlock = 2
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
	if err := token(ep, p); err != nil {
		return err
	}
	return shift(ep, p)
}

// token sends a counter round the ring laps times; rank 0 starts each lap
// and prints the count it comes back with.
func token(ep *knemesis.Endpoint, p launch.Proc) error {
	right, left := (p.Rank+1)%p.Size, (p.Rank+p.Size-1)%p.Size
	tok := []int64{0}
	for lap := 1; lap <= laps; lap++ {
		if p.Rank == 0 {
			if err := knemesis.Send(ep, right, tagToken, tok); err != nil {
				return err
			}
		}
		if _, err := knemesis.Recv(ep, left, tagToken, tok); err != nil {
			return err
		}
		if p.Rank == 0 {
			fmt.Printf("lap %d: the token came back as %d\n", lap, tok[0])
			continue
		}
		tok[0] += int64(p.Rank)
		if err := knemesis.Send(ep, right, tagToken, tok); err != nil {
			return err
		}
	}
	return nil
}

// shift moves every rank's block right, size-1 times, with Sendrecv:
// each step sends the block received at the step before.
func shift(ep *knemesis.Endpoint, p launch.Proc) error {
	right, left := (p.Rank+1)%p.Size, (p.Rank+p.Size-1)%p.Size
	out, in := block(p.Rank), make([]float64, blockLen)
	for step := 1; step < p.Size; step++ {
		st, err := knemesis.Sendrecv(ep, right, tagBlock, out, left, tagBlock, in)
		if err != nil {
			return err
		}
		from := (p.Rank + p.Size - step) % p.Size
		if p.Rank == 0 {
			fmt.Printf("step %d: %d float64 of rank %d's block, crc32 %08x, first %g\n",
				step, knemesis.Count[float64](st), from, crc(in), in[0])
		}
		if want := crc(block(from)); crc(in) != want {
			return fmt.Errorf("step %d: rank %d's block arrived with crc32 %08x, sent with %08x", step, from, crc(in), want)
		}
		out, in = in, out
	}
	return nil
}

// block is rank r's block: a sine wave of r's own phase.
func block(r int) []float64 {
	b := make([]float64, blockLen)
	for i := range b {
		b[i] = math.Round(1000*math.Sin(float64(i)/100+float64(r))) / 1000
	}
	return b
}

func crc(s []float64) uint32 {
	h := crc32.NewIEEE()
	var w [8]byte
	for _, v := range s {
		u := math.Float64bits(v)
		for i := range w {
			w[i] = byte(u >> (8 * i))
		}
		h.Write(w[:])
	}
	return h.Sum32()
}
