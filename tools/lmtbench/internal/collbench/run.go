// Package collbench is lmtbench coll: the OSU-style latency of the
// collectives of package coll, per operation, size and job size, beside
// the same operations over Open MPI (its default choice, and the tuned,
// han and sm components each forced) and MPICH, through a small MPI
// program compiled during the run (Debian packages neither the OSU
// benchmarks nor IMB). Every variant runs in turn within each round, on
// the same CPUs; each figure is the median over rounds of the slowest
// rank's mean time per operation.
package collbench

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
	"strings"
	"time"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/selfjob"
)

//go:embed mpi/coll.c
var mpiSource []byte

// The operations measured.
const (
	Barrier   = "barrier"
	Bcast     = "bcast"
	Allreduce = "allreduce"
	Alltoall  = "alltoall"
	// IS is the NAS IS-like bucket sort (is.go): the size is the bytes of
	// 4-byte keys each rank sorts.
	IS = "is"
)

// Ops are the operations measured by default, in the order they are
// printed; AllOps adds those measured when named (--backends).
var (
	Ops    = []string{Barrier, Bcast, Allreduce, Alltoall}
	AllOps = []string{Barrier, Bcast, Allreduce, Alltoall, IS}
)

// ParseOps reads --backends: a comma list of operations of AllOps, each
// once; empty is Ops.
func ParseOps(list string) ([]string, error) {
	if list == "" {
		return slices.Clone(Ops), nil
	}
	var ops []string
	for _, op := range strings.Split(list, ",") {
		switch {
		case !slices.Contains(AllOps, op):
			return nil, fmt.Errorf("--backends %q: %q is no operation of coll (%s)", list, op, strings.Join(AllOps, ","))
		case slices.Contains(ops, op):
			return nil, fmt.Errorf("--backends %q: %s named twice", list, op)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// PeerNames are the MPI rows, in the order they are measured.
func PeerNames() []string {
	names := make([]string, len(peers))
	for i, p := range peers {
		names[i] = p.name
	}
	return names
}

// ParsePeers reads --peers: a comma list of PeerNames, each once; empty
// is all of them, "none" none.
func ParsePeers(list string) ([]string, error) {
	switch list {
	case "":
		return PeerNames(), nil
	case "none":
		return []string{}, nil
	}
	var out []string
	for _, name := range strings.Split(list, ",") {
		switch {
		case !slices.Contains(PeerNames(), name):
			return nil, fmt.Errorf("--peers %q: %q is no MPI row of coll (%s, or none)", list, name, strings.Join(PeerNames(), ","))
		case slices.Contains(out, name):
			return nil, fmt.Errorf("--peers %q: %s named twice", list, name)
		}
		out = append(out, name)
	}
	return out, nil
}

// MaxProcs is the largest job lmtbench coll starts.
const MaxProcs = 64

// CheckProcs refuses a job size coll cannot run.
func CheckProcs(n int) error {
	if n < 2 || n > MaxProcs {
		return fmt.Errorf("--procs %d: coll runs 2 to %d ranks", n, MaxProcs)
	}
	return nil
}

// Knemesis names the toolkit's row.
const Knemesis = "knemesis"

// peer is one MPI row: the program built with mpicc, the launcher and
// its extra arguments.
type peer struct {
	name, cc, run string
	args          []string
}

var peers = []peer{
	{"openmpi", "mpicc.openmpi", "mpirun.openmpi", nil},
	{"openmpi-tuned", "mpicc.openmpi", "mpirun.openmpi", []string{"--mca", "coll", "tuned,libnbc,basic,self"}},
	{"openmpi-han", "mpicc.openmpi", "mpirun.openmpi", []string{"--mca", "coll_han_priority", "100"}},
	{"openmpi-sm", "mpicc.openmpi", "mpirun.openmpi", []string{"--mca", "coll", "sm,tuned,libnbc,basic,self", "--mca", "coll_sm_priority", "100"}},
	{"mpich", "mpicc.mpich", "mpiexec.mpich", nil},
}

// Config is one run.
type Config struct {
	Ops     []string
	Peers   []string // the MPI rows to measure, of PeerNames
	Sizes   []int
	Procs   int
	Rounds  int
	Iters   int
	CPUs    []int // the CPUs the ranks share, nil: unpinned
	Timeout time.Duration
	Stderr  io.Writer
}

// Oversubscribed reports whether the job has more ranks than CPUs.
func (c Config) Oversubscribed() bool { return c.CPUs == nil || c.Procs > len(c.CPUs) }

// Row is one variant at one operation and size.
type Row struct {
	Op      string          `json:"op"`
	Size    int             `json:"size"`
	Procs   int             `json:"procs"`
	Variant string          `json:"variant"`
	Latency float64         `json:"latency_us"` // median over rounds
	Rounds  int             `json:"rounds"`
	Skipped string          `json:"skipped,omitempty"`
	Over    bool            `json:"oversubscribed"`
	VsPeers *VsPeers        `json:"vs_peers,omitempty"` // the knemesis row's
	Samples []time.Duration `json:"-"`
}

// VsPeers compares the knemesis row with each peer at the same operation
// and size: the peer's median latency over knemesis's, above 1 when
// knemesis is faster; Best is the peer with the lowest ratio.
type VsPeers struct {
	Ratios map[string]float64 `json:"ratios"`
	Best   string             `json:"best"`
	Ratio  float64            `json:"ratio"`
}

// RunChoices is one knemesis job of cfg's shape whose rank 0 reports the
// LMT's choice by message size and concurrent transfers (choices.go).
func RunChoices(ctx context.Context, cfg Config) ([]string, error) {
	b, err := selfjob.RunProcs(ctx, EnvSpec, Spec{Op: choicesOp, Sizes: cfg.Sizes, CPUs: cfg.CPUs}, cfg.Procs, cfg.Timeout, cfg.Stderr)
	if err != nil {
		return nil, err
	}
	var c Choices
	if err := json.Unmarshal(bytes.TrimSpace(b), &c); err != nil || len(c.Lines) != len(cfg.Sizes)+1 {
		return nil, fmt.Errorf("choices: rank 0 printed %q, want the header and one line per size", bytes.TrimSpace(b))
	}
	return c.Lines, nil
}

// Run measures cfg.
func Run(ctx context.Context, cfg Config) ([]Row, error) {
	bins, why := build(ctx)
	defer func() {
		for _, b := range bins {
			os.RemoveAll(filepath.Dir(b))
		}
	}()
	samples := map[sampleKey][]time.Duration{}
	sums := map[string]checksum{} // the IS-like kernel's, by op and size
	variants := append([]string{Knemesis}, cfg.Peers...)
	for round := range cfg.Rounds {
		for _, op := range cfg.Ops {
			for _, size := range sizesFor(op, cfg.Sizes) {
				s := Spec{Op: op, Size: size, Iters: itersFor(cfg.Iters, size), Warmup: max(itersFor(cfg.Iters, size)/10, 2), CPUs: cfg.CPUs}
				for _, v := range variants {
					var r Result
					var err error
					if v == Knemesis {
						r, err = runKnemesis(ctx, s, cfg)
					} else {
						p := peerNamed(v)
						if bins[p.cc] == "" {
							continue
						}
						r, err = runMPI(ctx, p, bins[p.cc], s, cfg)
					}
					if err != nil {
						return nil, fmt.Errorf("round %d, %s %d B, %s: %w", round, op, size, v, err)
					}
					if op == IS {
						if err := sameKeys(sums, fmt.Sprintf("%s %d B", op, size), v, r.Checksum); err != nil {
							return nil, err
						}
					}
					k := sampleKey{op, size, v}
					samples[k] = append(samples[k], r.Latency())
				}
			}
		}
	}
	return rowsOf(cfg, variants, samples, why), nil
}

// sampleKey names the samples of one variant at one operation and size.
type sampleKey struct {
	op      string
	size    int
	variant string
}

// rowsOf makes the rows of a run: one per operation, size (one for the
// barrier) and variant, in that order, a variant without samples skipped
// with why[its compiler]'s reason; the knemesis row of each operation and
// size carries VsPeers.
func rowsOf(cfg Config, variants []string, samples map[sampleKey][]time.Duration, why map[string]string) []Row {
	var rows []Row
	for _, op := range cfg.Ops {
		for _, size := range sizesFor(op, cfg.Sizes) {
			first := len(rows)
			for _, v := range variants {
				t := samples[sampleKey{op, size, v}]
				row := Row{Op: op, Size: size, Procs: cfg.Procs, Variant: v, Rounds: len(t), Over: cfg.Oversubscribed(), Samples: t}
				if len(t) == 0 {
					row.Skipped = why[peerNamed(v).cc]
				} else {
					slices.Sort(t)
					row.Latency = float64(t[len(t)/2]) / 1e3
				}
				rows = append(rows, row)
			}
			compare(rows[first:])
		}
	}
	return rows
}

// checksum is the first variant's checksum of the keys it sorted.
type checksum struct {
	variant string
	sum     uint64
}

// sameKeys fails when variant sorted other keys than the first variant
// measured at k (an operation and size): the two generators disagree, and the times would not
// compare.
func sameKeys(sums map[string]checksum, k, variant string, sum uint64) error {
	first, ok := sums[k]
	switch {
	case !ok:
		sums[k] = checksum{variant, sum}
	case first.sum != sum:
		return fmt.Errorf("%s: %s's keys checksum to %#x, %s's to %#x: the two sides did not sort the same keys", k, first.variant, first.sum, variant, sum)
	}
	return nil
}

// compare sets VsPeers on the knemesis row among rows, the variants of
// one operation and size.
func compare(rows []Row) {
	i := slices.IndexFunc(rows, func(r Row) bool { return r.Variant == Knemesis })
	if i < 0 || rows[i].Rounds == 0 {
		return
	}
	mine := &rows[i]
	vs := &VsPeers{Ratios: map[string]float64{}}
	for _, r := range rows {
		if r.Variant == Knemesis || r.Rounds == 0 {
			continue
		}
		ratio := r.Latency / mine.Latency
		vs.Ratios[r.Variant] = ratio
		if vs.Best == "" || ratio < vs.Ratio {
			vs.Best, vs.Ratio = r.Variant, ratio
		}
	}
	if vs.Best != "" {
		mine.VsPeers = vs
	}
}

// sizesFor: a barrier moves no payload, so it is measured once.
func sizesFor(op string, sizes []int) []int {
	if op == Barrier {
		return []int{0}
	}
	return sizes
}

// itersFor keeps each job near the same payload volume: iters at 64 KiB
// and below, fewer above.
func itersFor(iters, size int) int {
	if size <= 64<<10 {
		return iters
	}
	return max(iters*(64<<10)/size, 10)
}

func peerNamed(name string) peer {
	for _, p := range peers {
		if p.name == name {
			return p
		}
	}
	return peer{}
}

// build compiles the MPI program with each MPI's mpicc; a missing one
// leaves its rows skipped, saying why.
func build(ctx context.Context) (map[string]string, map[string]string) {
	bins, why := map[string]string{}, map[string]string{}
	for _, cc := range []string{"mpicc.openmpi", "mpicc.mpich"} {
		if _, err := exec.LookPath(cc); err != nil {
			why[cc] = cc + " not found (apt-get install libopenmpi-dev libmpich-dev; make test installs them, mk/peers.mk)"
			continue
		}
		dir, err := os.MkdirTemp("", "lmtbench-coll-")
		if err != nil {
			why[cc] = err.Error()
			continue
		}
		src, bin := filepath.Join(dir, "coll.c"), filepath.Join(dir, "coll")
		if err := os.WriteFile(src, mpiSource, 0o600); err != nil {
			why[cc] = err.Error()
			os.RemoveAll(dir)
			continue
		}
		if out, err := exec.CommandContext(ctx, cc, "-O2", "-std=c99", "-o", bin, src).CombinedOutput(); err != nil {
			why[cc] = fmt.Sprintf("%s failed: %v: %s", cc, err, bytes.TrimSpace(out))
			os.RemoveAll(dir)
			continue
		}
		bins[cc] = bin
	}
	return bins, why
}

func runKnemesis(ctx context.Context, s Spec, cfg Config) (Result, error) {
	b, err := selfjob.RunProcs(ctx, EnvSpec, s, cfg.Procs, cfg.Timeout, cfg.Stderr)
	if err != nil {
		return Result{}, err
	}
	return parseResult(b)
}

func runMPI(ctx context.Context, p peer, bin string, s Spec, cfg Config) (Result, error) {
	var args []string
	switch p.run {
	case "mpirun.openmpi":
		shm, err := os.MkdirTemp("/dev/shm", "lmtbench-coll-")
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(shm)
		args = []string{"-np", strconv.Itoa(cfg.Procs), "--mca", "btl", "self,vader", "--mca", "btl_vader_backing_directory", shm}
		if os.Geteuid() == 0 {
			args = append(args, "--allow-run-as-root")
		}
		if cfg.Oversubscribed() {
			args = append(args, "--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1")
		} else {
			args = append(args, "--bind-to", "cpu-list:ordered", "--cpu-set", cpuList(cfg.CPUs[:cfg.Procs]))
		}
	case "mpiexec.mpich":
		args = []string{"-n", strconv.Itoa(cfg.Procs)}
		if !cfg.Oversubscribed() {
			args = append(args, "-bind-to", "user:"+cpuList(cfg.CPUs[:cfg.Procs]))
		}
	}
	args = append(args, p.args...)
	args = append(args, bin, s.Op, strconv.Itoa(s.Size), strconv.Itoa(s.Iters), strconv.Itoa(s.Warmup))
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, p.run, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, cfg.Stderr
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("%s: %w", p.run, err)
	}
	return parseResult(out.Bytes())
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

func parseResult(b []byte) (Result, error) {
	var r Result
	if err := json.Unmarshal(bytes.TrimSpace(b), &r); err != nil || r.Iters < 1 || r.Nanos <= 0 {
		return Result{}, fmt.Errorf("rank 0 printed %q, want {\"Nanos\":N,\"Iters\":I}", bytes.TrimSpace(b))
	}
	return r, nil
}

// Print writes the table: per operation and size, each variant's median
// latency, and knemesis's ratio to the best peer.
func Print(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "%-10s %9s %5s %-15s %12s %7s  %s\n", "op", "size", "ranks", "variant", "latency µs", "rounds", "vs best peer (>1: knemesis faster)")
	for _, r := range rows {
		size := strconv.Itoa(r.Size)
		if r.Op == Barrier {
			size = "-"
		}
		lat, note := fmt.Sprintf("%.2f", r.Latency), ""
		if r.Rounds == 0 {
			lat, note = "-", "("+r.Skipped+")"
		}
		if r.VsPeers != nil {
			note = fmt.Sprintf("%.2f (%s)", r.VsPeers.Ratio, r.VsPeers.Best)
		}
		fmt.Fprintf(w, "%-10s %9s %5d %-15s %12s %7d  %s\n", r.Op, size, r.Procs, r.Variant, lat, r.Rounds, note)
	}
}

func readSpec(s *Spec) error {
	if err := json.Unmarshal([]byte(os.Getenv(EnvSpec)), s); err != nil {
		return fmt.Errorf("reading %s: %w", EnvSpec, err)
	}
	return nil
}
