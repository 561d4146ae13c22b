package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/typedbench"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// Defaults of lmtbench vector and indexed: the indexed type of
// NewMadeleine's §5.3 (Aumage, Brunet, Furmento, Namyst, CAC 2007), 1,000
// blocks alternating 64 B and 256 KiB; a vector of a million 8-byte
// blocks (every block small: all staged) and one of 256 KiB blocks (all
// moved in place). Both variants use the same LMT backend, CMA, the one
// that takes a description, so that the rows differ by packing alone.
const (
	typedVectors = "1Mx8/16,64x256K/512K"
	typedBlocks  = 1000
	typedSmall   = "64"
	typedLarge   = "256K"
	typedPrefer  = lmt.CMA
	// typedBytes is what a sample moves each way by default: the
	// iteration count is this over the payload, within [2, 1000].
	typedBytes = 256 << 20
)

// runTyped is lmtbench vector or indexed (kind): see package typedbench.
func runTyped(kind string) command {
	return func(ctx context.Context, o *options, stdout, stderr io.Writer) error {
		shapes, err := o.typedShapes(kind)
		if err != nil {
			return err
		}
		cpus, err := o.pinning(2)
		if err != nil {
			return err
		}
		prefer := strings.Split(typedPrefer, ",")
		if o.backends != "" {
			prefer = strings.Split(o.backends, ",")
		}
		var results []report.Result
		for _, sh := range shapes {
			typ, _ := sh.Type() // typedShapes built it once
			size := int(typ.Size())
			iters := o.iters
			if iters == 0 {
				iters = min(1000, max(2, typedBytes/max(size, 1)))
			}
			spec := typedbench.Spec{Shape: sh, Rounds: o.samples, Iters: iters, Warmup: max(1, iters/4), Prefer: prefer, CPUs: cpus}
			samples, err := typedbench.Run(ctx, typedbench.Config{Spec: spec, Timeout: o.timeout, Stderr: stderr})
			if err != nil {
				return err
			}
			for _, v := range typedbench.Variants {
				r := report.Aggregate(kind, v, false, typedSamples(samples, v, size))
				r.CPUs, r.Machine = cpus, o.facts()
				results = append(results, r)
			}
		}
		report.CompareTyped(results)
		if !o.machineReadable() {
			fmt.Fprintf(stdout, "%s: ping-pong of a message described by a derived datatype (NewMadeleine §5.3: Aumage, Brunet, Furmento, Namyst, CAC 2007), LMT backends %s; typed = SendType/RecvType, pack = pack + Send/Recv + unpack, as MPICH; rounds alternate which goes first\n", kind, strings.Join(prefer, ","))
			for _, sh := range shapes {
				typ, _ := sh.Type()
				fmt.Fprintf(stdout, "  %s: %s of payload\n", sh, units.Format(int(typ.Size())))
			}
		}
		return o.write(stdout, results)
	}
}

// typedSamples turns variant v's samples into the harness's, for report:
// a round trip is two messages of size bytes, placement unknown.
func typedSamples(all []typedbench.Sample, v string, size int) []harness.Sample {
	var out []harness.Sample
	for _, s := range all {
		if s.Variant == v {
			out = append(out, harness.Sample{
				Size: size, Iterations: s.Iters, Messages: 2 * s.Iters, Seconds: float64(s.Nanos) / 1e9,
				CPUSeconds: s.CPU, Before: machine.Unknown, After: machine.Unknown, Round: s.Round,
			})
		}
	}
	return out
}

// typedShapes reads the shapes of kind from the flags: --vectors, or
// --blocks, --small and --large. Two shapes of one payload would share
// their rows: refused.
func (o *options) typedShapes(kind string) ([]typedbench.Shape, error) {
	var shapes []typedbench.Shape
	if kind == typedbench.Vector {
		list := o.vectors
		if list == "" {
			list = typedVectors
		}
		for _, f := range strings.Split(list, ",") {
			sh, err := parseVector(strings.TrimSpace(f))
			if err != nil {
				return nil, err
			}
			shapes = append(shapes, sh)
		}
	} else {
		small, err := units.ParseSize(orDefault(o.small, typedSmall))
		if err != nil || small < 1 {
			return nil, usagef("--small %q: want a block size of 1 byte or more, like 64", o.small)
		}
		large, err := units.ParseSize(orDefault(o.large, typedLarge))
		if err != nil || large < 1 {
			return nil, usagef("--large %q: want a block size of 1 byte or more, like 256K", o.large)
		}
		if o.blocks < 1 {
			return nil, usagef("--blocks %d: want 1 or more", o.blocks)
		}
		shapes = append(shapes, typedbench.Shape{Kind: kind, Blocks: o.blocks, Small: int64(small), Large: int64(large)})
	}
	sizes := map[int64]typedbench.Shape{}
	for _, sh := range shapes {
		typ, err := sh.Type()
		if err != nil {
			return nil, usagef("%v: %v", sh, err)
		}
		if other, ok := sizes[typ.Size()]; ok {
			return nil, usagef("%v and %v both carry %d bytes: give shapes of different payloads, one row pair each", other, sh, typ.Size())
		}
		sizes[typ.Size()] = sh
	}
	return shapes, nil
}

// parseVector reads COUNTxBLOCK/STRIDE, sizes as --sizes takes them.
func parseVector(f string) (typedbench.Shape, error) {
	bad := usagef("--vectors %q: want COUNTxBLOCK/STRIDE entries, like 1Mx8/16 (a million 8-byte blocks 16 bytes apart)", f)
	count, rest, ok := strings.Cut(f, "x")
	block, stride, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return typedbench.Shape{}, bad
	}
	var v [3]int
	for i, s := range []string{count, block, stride} {
		n, err := units.ParseSize(s)
		if err != nil || n < 1 {
			return typedbench.Shape{}, bad
		}
		v[i] = n
	}
	return typedbench.Shape{Kind: typedbench.Vector, Count: int64(v[0]), BlockLen: int64(v[1]), Stride: int64(v[2])}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
