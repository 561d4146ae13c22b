package multiseg

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/selfjob"
)

//go:embed mpi/multiseg.c
var mpiSource []byte

// OpenMPI names the Open MPI row.
const OpenMPI = "openmpi"

// Config is one multiseg run: every shape (segments × size) measured by
// every variant, Samples rounds interleaved.
type Config struct {
	Shapes  []Shape
	Samples int
	Iters   int
	CPUs    []int // nil: unpinned
	Timeout time.Duration
	Stderr  io.Writer
}

// Shape is one message: Segs segments of Size bytes.
type Shape struct{ Segs, Size int }

// Row is the median one-way time of one variant at one shape, and how
// many samples made it.
type Row struct {
	Shape   Shape
	Variant string
	Median  time.Duration
	Samples int
	Skipped string // why the variant did not run (Open MPI missing)
}

// Run measures cfg and returns one Row per shape and variant.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	variants := []string{Straightforward, Aggregate, Batch, OpenMPI}
	mpi, why := buildMPI(ctx)
	if mpi != "" {
		defer os.RemoveAll(filepath.Dir(mpi))
	}
	times := map[Shape]map[string][]time.Duration{}
	for round := range cfg.Samples {
		for _, sh := range cfg.Shapes {
			if times[sh] == nil {
				times[sh] = map[string][]time.Duration{}
			}
			for _, v := range variants {
				if v == OpenMPI && mpi == "" {
					continue
				}
				s := Spec{Variant: v, Segs: sh.Segs, Size: sh.Size, Iters: cfg.Iters, Warmup: max(cfg.Iters/4, 12), CPUs: cfg.CPUs}
				var r Result
				var err error
				if v == OpenMPI {
					r, err = runMPI(ctx, mpi, s, cfg)
				} else {
					r, err = runNemesis(ctx, s, cfg)
				}
				if err != nil {
					return nil, fmt.Errorf("round %d, %d×%d B, %s: %w", round, sh.Segs, sh.Size, v, err)
				}
				times[sh][v] = append(times[sh][v], r.OneWay())
			}
		}
	}
	var rows []Row
	for _, sh := range cfg.Shapes {
		for _, v := range variants {
			t := times[sh][v]
			row := Row{Shape: sh, Variant: v, Samples: len(t)}
			if len(t) == 0 {
				row.Skipped = why
			} else {
				slices.Sort(t)
				row.Median = t[len(t)/2]
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func runNemesis(ctx context.Context, s Spec, cfg Config) (Result, error) {
	b, err := selfjob.Run(ctx, EnvSpec, s, cfg.Timeout, cfg.Stderr)
	if err != nil {
		return Result{}, err
	}
	return parseResult(b)
}

func parseResult(b []byte) (Result, error) {
	var r Result
	if err := json.Unmarshal(bytes.TrimSpace(b), &r); err != nil || r.Iters < 1 || r.Nanos <= 0 {
		return Result{}, fmt.Errorf("rank 0 printed %q, want {\"Nanos\":N,\"Iters\":I}", bytes.TrimSpace(b))
	}
	return r, nil
}

// buildMPI compiles the MPI side with Open MPI's mpicc into a temporary
// directory; it returns the program, or "" and why not.
func buildMPI(ctx context.Context) (string, string) {
	for _, p := range []string{"mpicc.openmpi", "mpirun.openmpi"} {
		if _, err := exec.LookPath(p); err != nil {
			return "", p + " not found (Open MPI: apt-get install openmpi-bin libopenmpi-dev; make test installs it, mk/peers.mk)"
		}
	}
	dir, err := os.MkdirTemp("", "lmtbench-multiseg-")
	if err != nil {
		return "", err.Error()
	}
	src, bin := filepath.Join(dir, "multiseg.c"), filepath.Join(dir, "multiseg")
	if err := os.WriteFile(src, mpiSource, 0o600); err != nil {
		os.RemoveAll(dir)
		return "", err.Error()
	}
	out, err := exec.CommandContext(ctx, "mpicc.openmpi", "-O2", "-std=c99", "-o", bin, src).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Sprintf("mpicc.openmpi failed: %v: %s", err, bytes.TrimSpace(out))
	}
	return bin, ""
}

// runMPI runs the MPI side over Open MPI's shared-memory BTL, its segment
// in a directory of its own that goes with the run.
func runMPI(ctx context.Context, bin string, s Spec, cfg Config) (Result, error) {
	shm, err := os.MkdirTemp("/dev/shm", "lmtbench-multiseg-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(shm)
	args := []string{"-np", "2"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	if cfg.CPUs != nil {
		args = append(args, "--bind-to", "cpu-list:ordered", "--cpu-set", strconv.Itoa(cfg.CPUs[0])+","+strconv.Itoa(cfg.CPUs[1]))
	} else {
		args = append(args, "--bind-to", "none")
	}
	args = append(args, "--mca", "btl", "self,vader", "--mca", "btl_vader_backing_directory", shm,
		bin, strconv.Itoa(s.Segs), strconv.Itoa(s.Size), strconv.Itoa(s.Iters), strconv.Itoa(s.Warmup))
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "mpirun.openmpi", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, cfg.Stderr
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("mpirun.openmpi: %w", err)
	}
	return parseResult(out.Bytes())
}

// Print writes the table: each variant's median one-way time per shape,
// and the ratios of straightforward and Open MPI to each aggregating
// variant (above 1: aggregation is faster).
func Print(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "%-10s %-16s %12s %8s\n", "message", "variant", "one-way", "samples")
	by := map[Shape]map[string]Row{}
	var shapes []Shape
	for _, r := range rows {
		if by[r.Shape] == nil {
			by[r.Shape] = map[string]Row{}
			shapes = append(shapes, r.Shape)
		}
		by[r.Shape][r.Variant] = r
	}
	for _, sh := range shapes {
		name := fmt.Sprintf("%d×%d B", sh.Segs, sh.Size)
		for _, v := range []string{Straightforward, Aggregate, Batch, OpenMPI} {
			r := by[sh][v]
			if r.Samples == 0 {
				fmt.Fprintf(w, "%-10s %-16s %12s %8d  (%s)\n", name, v, "-", 0, r.Skipped)
				continue
			}
			fmt.Fprintf(w, "%-10s %-16s %12s %8d\n", name, v, r.Median, r.Samples)
		}
		for _, agg := range []string{Aggregate, Batch} {
			a := by[sh][agg]
			for _, base := range []string{Straightforward, OpenMPI} {
				b := by[sh][base]
				if a.Samples > 0 && b.Samples > 0 {
					fmt.Fprintf(w, "%-10s %s / %s = %.2f (%s, %s)\n", name, base, agg, float64(b.Median)/float64(a.Median), b.Median, a.Median)
				}
			}
		}
	}
}
