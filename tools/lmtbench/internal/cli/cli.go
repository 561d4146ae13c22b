// Package cli is lmtbench's command line: subcommands, flags, the checks
// that turn bad input into one clear line, and the sweep that drives the
// harness and the report.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/knemesis/knemesis/internal/pages"
	"github.com/knemesis/knemesis/netmod/ofinet"
	"github.com/knemesis/knemesis/netmod/pmix"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/pagebuf"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/typedbench"
)

const usageText = `usage: lmtbench [command] [flags]

Compares the toolkit's transfer backends on this machine. Without a command
it prints what it found about the machine and runs the ping-pong sweep from
4 KiB to 64 MiB over every backend that works here.

commands:
  info       machine, caches, placement, which backends work and why the others do not
  pingpong   IMB ping-pong; latency is half the round trip (the default sweep)
  bidir      both ranks send at once, then receive (Ben Fredj and Renault)
  stream     burst: the sender sends without waiting for replies (Ben Fredj and Renault)
  latency    small messages through the Nemesis queue and fastbox, 0 B to the cell size
  alltoall   -n N processes exchange with every other (ICPP 2009 §4.4)
  pollution  how much a transfer slows the receiver's re-read of a cache-sized working set
  tune       measure the crossovers here and write the selector's tuning file
  copies     bytes copied per payload byte, by copier, from the eBPF probes
  peers      the same sizes and shapes over Open MPI, MPICH, UCX and libfabric, in the same run
  multiseg   ping-pong of 8 or 16 tagged segments per message (NewMadeleine §5.2): Nemesis
             with aggregation off, on, in a batch, and Open MPI's same Isends
  coll       OSU-style latency of Barrier, Bcast, Allreduce and Alltoall (package coll),
             --procs ranks (2), --sizes (8 B to 16 MiB), --backends to choose operations,
             beside Open MPI (default, tuned, han, sm) and MPICH through an MPI program
             compiled during the run; says when the job is oversubscribed. --backends is:
             a NAS IS-like bucket sort (--sizes: bytes of keys per rank), checked by checksum;
             ICPP 2009 §4.4's Alltoall: --procs 8 --backends alltoall --sizes 4K-4M
  vector     ping-pong of a vector datatype (NewMadeleine §5.3: Aumage, Brunet, Furmento,
             Namyst, CAC 2007), --vectors COUNTxBLOCK/STRIDE (default 1Mx8/16,64x256K/512K):
             typed send/receive (Endpoint.SendType) against pack + send + unpack (as MPICH),
             interleaved, with the ratio typed ÷ pack
  indexed    the same for the paper's indexed type: --blocks (default 1000) alternating
             --small (64) and --large (256K) bytes; --backends is the LMT preference (cma)
  put, get   one-sided put (with notification) and get of package rma, per mechanism,
             in RWAPI's three shapes: pingpong, bidir, stream (Ben Fredj and Renault)
  table      --from FILE.json: the Markdown tables of a --json run (README.md and
             docs/performance.md are made of them); measures nothing

Started by mpirun or srun (a PMIx launcher), an lmtbench built with
go build -tags "ofi pmix" runs pingpong, bidir or stream between rank 0 and
one partner of the job (--peer; default the first rank on another node),
over the nemesis endpoint: shared memory within a node, the libfabric
network module between nodes; each row names the path.

flags:
`

// exitUsage is the status for bad input; exitFail for a run that failed.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// usageError marks errors in what the user typed.
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// Main runs lmtbench with args (without the program name) and returns the
// exit status. Every failure is one line on stderr.
func Main(args []string, stdout, stderr io.Writer) int {
	err := run(args, stdout, stderr)
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var st exitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	var ue usageError
	if errors.As(err, &ue) && pmix.LaunchedRank() > 0 {
		// Every rank of a launcher's job read the same command line:
		// rank 0 says what is wrong with it, once, and its status fails
		// the job. The others leave quietly and with 0, for a launcher
		// that saw a rank fail first would kill rank 0 before it spoke.
		return exitOK
	}
	fmt.Fprintf(stderr, "lmtbench: %s\n", oneLine(err.Error()))
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFail
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// options are the parsed flags.
type options struct {
	command    string
	backends   string
	sizes      string
	iters      int
	sampleTime time.Duration
	warmup     time.Duration
	samples    int
	cpus       string
	procs      int
	json, csv  bool
	benchfmt   bool
	plot       string
	report     string // directory of the HTML report
	vm         bool
	timeout    time.Duration
	probe      string
	progress   bool
	reuse      bool
	copies     bool
	workingSet string
	from       string // table: the --json file to print

	tuningFile string
	shapes     string // peers: which shapes
	peerNames  string // peers: which peers
	segs       string // multiseg: segment counts
	vectors    string // vector: COUNTxBLOCK/STRIDE list
	blocks     int    // indexed: block count
	small      string // indexed: small block size
	large      string // indexed: large block size

	// hugepages runs every backend with small and huge buffers
	// (--hugepages); pageKinds is what interleave runs, nil for the heap.
	hugepages bool
	pageKinds []pagebuf.Kind
	// pagesHost is this host's huge-page facts and the job's config
	// (pages.Host); tests give recorded machines.
	pagesHost func() (pages.System, pages.Config)

	// alongside measures more rows in each round and size of interleave
	// (lmtbench peers).
	alongside rowsAlongside
	// measuresAt, when set, says whether interleave measures backend at
	// size (lmtbench peers runs the fastbox row only where a message fits
	// a fastbox).
	measuresAt func(backend string, size int) bool

	// Under a PMIx launcher (job.go): rank 0's partner, -1 to choose;
	// the network module's provider and address; whether --cpus was given.
	peer           int
	provider, node string
	cpusSet        bool

	avail   map[string]error // backend name → nil or why it cannot run; see availability
	machine *machine.Facts
	// regimes are the placement regimes of the last run's readings.
	regimes machine.Regimes
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{command: "sweep"}
	// "lmtbench --vm pingpong ..." reads as naturally as "pingpong --vm".
	if len(args) > 1 && (args[0] == "--vm" || args[0] == "-vm") && !strings.HasPrefix(args[1], "-") {
		args = append([]string{args[1], args[0]}, args[2:]...)
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		o.command, args = args[0], args[1:]
		if _, ok := commands[o.command]; !ok {
			return nil, usagef("unknown command %q (commands: %s)", o.command, commandList())
		}
	}
	fs := flag.NewFlagSet("lmtbench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.backends, "backends", "", "comma-separated backends to measure (default: every one that works here)")
	fs.StringVar(&o.sizes, "sizes", "", "sizes: 4K, 64KiB, 1M, 1MiB, ranges lo-hi of powers of two, comma lists (default 4K-64M)")
	fs.IntVar(&o.iters, "iters", 0, "iterations per sample (default: calibrated to --time)")
	fs.DurationVar(&o.sampleTime, "time", 15*time.Millisecond, "target duration of one sample")
	fs.DurationVar(&o.warmup, "warmup", harness.DefaultWarmup, "untimed run of each job's first size before its samples, at least this long: a fresh pair of ranks runs slower for its first tens of milliseconds")
	fs.IntVar(&o.samples, "samples", 2, "samples per size, each bracketed by the placement probe")
	fs.StringVar(&o.cpus, "cpus", "apart", "pinning of the two processes: apart (two CPUs), same (one CPU), shared or unshared (a cache), none, or a list like 0,1")
	fs.IntVar(&o.procs, "procs", 2, "processes in the job (alltoall: also -n)")
	fs.IntVar(&o.procs, "n", 2, "processes for alltoall")
	fs.BoolVar(&o.hugepages, "hugepages", false, "sweep, pingpong: run every backend with its buffers in huge pages and in 4 KiB pages, interleaved, and print both throughputs and huge/small (default sizes 4M-64M)")
	fs.BoolVar(&o.reuse, "reuse", false, "pingpong: send back the buffer just received, as NetPIPE does (mode netpipe)")
	fs.BoolVar(&o.copies, "copies", true, "also count copies per byte with the eBPF probes, when this process may load them")
	fs.StringVar(&o.workingSet, "working-set", "", "pollution: bytes the receiver re-reads (default: its L2 cache)")
	fs.StringVar(&o.tuningFile, "tuning-file", "", "tune: where to write the tuning file (default $KNEMESIS_TUNING, else knemesis/tuning.json in the user config directory)")
	fs.StringVar(&o.shapes, "shapes", "", "peers: shapes to measure, of pingpong, netpipe and stream (default all three)")
	fs.StringVar(&o.peerNames, "peers", "", "peers: which peer stacks (default every one installed; lmtbench peers --help lists them); coll: which MPI rows, of openmpi, openmpi-tuned, openmpi-han, openmpi-sm, mpich, or none (default all)")
	fs.StringVar(&o.segs, "segs", "", "multiseg: segments per message, a comma list (default "+multisegSegs+"; 1 is the plain ping-pong)")
	fs.StringVar(&o.vectors, "vectors", "", "vector: shapes COUNTxBLOCK/STRIDE, a comma list (default "+typedVectors+")")
	fs.IntVar(&o.blocks, "blocks", typedBlocks, "indexed: number of blocks, alternating --small and --large bytes")
	fs.StringVar(&o.small, "small", "", "indexed: length of the small blocks (default "+typedSmall+")")
	fs.StringVar(&o.large, "large", "", "indexed: length of the large blocks (default "+typedLarge+")")
	fs.StringVar(&o.from, "from", "", "table: the file an earlier --json run wrote")
	fs.BoolVar(&o.json, "json", false, "print results as a JSON array instead of the table")
	fs.BoolVar(&o.csv, "csv", false, "print results as CSV instead of the table (schema in tools/lmtbench/README.md)")
	fs.BoolVar(&o.benchfmt, "benchfmt", false, "print Go benchmark lines for benchstat instead of the table")
	fs.StringVar(&o.plot, "plot", "", "also draw throughput against size to FILE.png or FILE.svg")
	fs.StringVar(&o.report, "report", "", "also write DIR/index.html: one self-contained page with the machine, the tables and the plots")
	fs.BoolVar(&o.vm, "vm", false, "run the kernel module's backends inside the QEMU guest of ci/")
	fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up on a job whose ranks have not finished after this long")
	fs.StringVar(&o.probe, "placement-probe", "", "placement probe to bracket samples with: a program printing \"near|far <µs>\", 'builtin' (a cache line timed between the two ranks) or 'none' (default $LMTBENCH_PLACEMENT_PROBE when set, else builtin)")
	fs.BoolVar(&o.progress, "progress", term.IsTerminal(int(os.Stderr.Fd())), "draw a progress bar on stderr")
	fs.IntVar(&o.peer, "peer", -1, "under mpirun or srun: the rank that rank 0 measures with (default: the first rank on another node)")
	fs.StringVar(&o.provider, "provider", ofinet.DefaultProvider, "under mpirun or srun: libfabric provider of the network module (one of "+ofinet.ProviderNames()+")")
	fs.StringVar(&o.node, "node", "", "under mpirun or srun: address the network module binds (default: this host's name)")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usageText)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return nil, err
		}
		return nil, usagef("%v", err)
	}
	launcherOnly := ""
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "cpus":
			o.cpusSet = true
		case "peer", "provider", "node":
			launcherOnly = f.Name
		}
	})
	if launcherOnly != "" && !pmix.Launched() {
		return nil, usagef("--%s applies under a PMIx launcher (mpirun, srun), which starts the ranks itself", launcherOnly)
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (flags go after the command: lmtbench %s --sizes 4K-1M)", fs.Arg(0), o.command)
	}
	n := 0
	for _, b := range []bool{o.json, o.csv, o.benchfmt} {
		if b {
			n++
		}
	}
	if n > 1 {
		return nil, usagef("--json, --csv and --benchfmt each replace the table; pick one")
	}
	if o.iters < 0 {
		return nil, usagef("--iters %d: want a positive count", o.iters)
	}
	if o.iters == 0 && o.sampleTime <= 0 {
		return nil, usagef("--time %v: want a positive duration", o.sampleTime)
	}
	if o.warmup < 0 {
		return nil, usagef("--warmup %v: want a duration of 0 or more", o.warmup)
	}
	if o.samples < 1 {
		return nil, usagef("--samples %d: want at least 1", o.samples)
	}
	if o.timeout <= 0 {
		return nil, usagef("--timeout %v: want a positive duration", o.timeout)
	}
	if o.reuse && o.command != "pingpong" && o.command != "sweep" {
		return nil, usagef("--reuse applies to pingpong, not %s", o.command)
	}
	if o.hugepages && o.command != "pingpong" && o.command != "sweep" {
		return nil, usagef("--hugepages applies to the ping-pong sweep (lmtbench, lmtbench pingpong), not %s", o.command)
	}
	if o.hugepages && (o.plot != "" || o.report != "") {
		return nil, usagef("--hugepages prints its own table of both page sizes; --plot and --report draw one row per backend")
	}
	if o.hugepages && (o.csv || o.benchfmt) {
		return nil, usagef("--hugepages: --csv and --benchfmt have no page-size column; use --json, whose rows carry pages")
	}
	if err := o.checkReport(); err != nil {
		return nil, err
	}
	if o.plot != "" && o.command == "pollution" {
		return nil, usagef("--plot draws throughput; pollution has none to draw")
	}
	if o.workingSet != "" && o.command != "pollution" {
		return nil, usagef("--working-set applies to pollution, not %s", o.command)
	}
	if o.plot != "" {
		if err := report.CheckPlotPath(o.plot); err != nil {
			return nil, usageError{err}
		}
	}
	return o, nil
}

// command runs one subcommand with parsed options.
type command func(ctx context.Context, o *options, stdout, stderr io.Writer) error

var commands map[string]command

func init() {
	commands = map[string]command{
		"sweep":     runSweep,
		"info":      runInfo,
		"pingpong":  runMode(harness.PingPong),
		"bidir":     runMode(harness.Bidir),
		"stream":    runMode(harness.Stream),
		"latency":   runMode(harness.Latency),
		"alltoall":  runAlltoall,
		"pollution": runMode(harness.Pollution),
		"tune":      runTune,
		"copies":    runCopies,
		"peers":     runPeers,
		"multiseg":  runMultiseg,
		"coll":      runColl,
		"vector":    runTyped(typedbench.Vector),
		"indexed":   runTyped(typedbench.Indexed),
		"put":       runRMA("put"),
		"get":       runRMA("get"),
		"table":     runTable,
	}
}

func commandList() string {
	return "info, pingpong, bidir, stream, latency, alltoall, pollution, tune, copies, peers, multiseg, coll, vector, indexed, put, get, table"
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if pmix.Launched() {
		return runInJob(context.Background(), o, stdout, stderr)
	}
	if o.vm {
		return runVM(o, args, stdout, stderr)
	}
	return commands[o.command](context.Background(), o, stdout, stderr)
}

// probePath resolves --placement-probe: "" for none, machine.Builtin, or
// a program's path. Without the flag, $LMTBENCH_PLACEMENT_PROBE when the
// user set it, else the built-in one: every sample is bracketed on any
// machine, and nothing is looked for beside the repository.
func (o *options) probePath() string {
	switch o.probe {
	case "none":
		return ""
	case "":
		if p := machine.ProbePath(); p != "" {
			return p
		}
		return machine.Builtin
	}
	return o.probe
}
