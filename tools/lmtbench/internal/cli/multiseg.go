package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/multiseg"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// Defaults of lmtbench multiseg: the segment counts and sizes of
// NewMadeleine's §5.2 (Aumage, Brunet, Furmento, Namyst, CAC 2007), and
// the plain 8-byte ping-pong (one segment), where the window must cost
// nothing.
const (
	multisegSegs  = "1,8,16"
	multisegSizes = "8,64,512,4K"
	multisegIters = 2000
)

// runMultiseg is lmtbench multiseg: see package multiseg.
func runMultiseg(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	segs, err := parseSegs(o.segs)
	if err != nil {
		return err
	}
	sizeList := o.sizes
	if sizeList == "" {
		sizeList = multisegSizes
	}
	sizes, err := units.ParseList(sizeList, 1)
	if err != nil {
		return usagef("--sizes: %v", err)
	}
	cpus, err := o.pinning(2)
	if err != nil {
		return err
	}
	iters := o.iters
	if iters == 0 {
		iters = multisegIters
	}
	var shapes []multiseg.Shape
	for _, n := range segs {
		for _, sz := range sizes {
			if n == 1 && sz != sizes[0] {
				continue // one segment: the plain ping-pong, at the smallest size only
			}
			shapes = append(shapes, multiseg.Shape{Segs: n, Size: sz})
		}
	}
	rows, err := multiseg.Run(ctx, multiseg.Config{Shapes: shapes, Samples: o.samples, Iters: iters, CPUs: cpus, Timeout: o.timeout, Stderr: stderr})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "multiseg: messages of N segments, each its own Isend/Irecv and tag (NewMadeleine §5.2: Aumage, Brunet, Furmento, Namyst, CAC 2007); median of %d rounds, %d round trips each; one-way = round trip / 2; ratio above 1: the aggregating variant is faster\n", o.samples, iters)
	multiseg.Print(stdout, rows)
	return nil
}

func parseSegs(s string) ([]int, error) {
	if s == "" {
		s = multisegSegs
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 1024 {
			return nil, usagef("--segs %q: want a comma list of segment counts 1..1024, like 8,16", s)
		}
		out = append(out, n)
	}
	return out, nil
}
