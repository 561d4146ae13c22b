package peers

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
)

// Shapes, named as lmtbench's modes (package harness).
const (
	PingPong = "pingpong" // IMB: separate send and receive buffers
	NetPIPE  = "netpipe"  // ping-pong sending back the buffer just received
	Stream   = "stream"   // the sender does not wait for replies
)

// Peer is one stack in one configuration, measured by one program.
type Peer struct {
	Name    string   // row name in lmtbench's tables: "ompi", "ucx-posix", …
	Stack   string   // what a user would call it: "Open MPI, vader with single copy off"
	Tool    string   // the benchmark program, as the table credits it
	Package string   // the Debian package that provides the programs
	Shapes  []string // the shapes the program measures
	// Programs must all be on $PATH for the peer to run: the benchmark
	// and, for MPI stacks, the stack's own launcher.
	Programs []string
	// invocation builds the command lines of one sample.
	invocation func(j Job) Invocation
	// parse reads the tool's report of the sample.
	parse func(out []byte, j Job) (Measurement, error)
}

// Job is one sample: a shape, a size, an iteration count and where the
// two processes run.
type Job struct {
	Shape string
	Size  int
	Iters int
	// CPUs are the CPUs of the two processes (first the one that starts
	// each message exchange), nil when unpinned.
	CPUs []int
	// Root adds what MPI launchers need to run as root.
	Root bool
	// Port is a free TCP port for tools whose two processes meet over
	// TCP before they use shared memory.
	Port int
	// OutFile is where a tool that writes its report to a file (NetPIPE)
	// writes it.
	OutFile string
	// ShmDir is a directory of /dev/shm of this sample alone, for the
	// shared-memory files of a stack that names them itself (Open MPI's
	// vader segments): removed after the sample, even one killed at its
	// deadline, which would otherwise leave them behind.
	ShmDir string
}

// Measurement is one sample in lmtbench's units.
type Measurement struct {
	Size        int
	Iterations  int     // as given to the tool
	Messages    int     // messages the timed loop moved: 2 per ping-pong iteration, 1 in a stream
	BytesPerSec float64 // payload bytes per second (10^9 B/s = 1 GB/s)
}

// LatencyUs is the time per message in µs: half the round trip in
// ping-pong.
func (m Measurement) LatencyUs() float64 { return float64(m.Size) / m.BytesPerSec * 1e6 }

// Seconds is the time the timed loop would have taken at the tool's rate.
func (m Measurement) Seconds() float64 {
	return float64(m.Messages) * float64(m.Size) / m.BytesPerSec
}

// NotInstalled says which program is missing and which package has it.
type NotInstalled struct {
	Peer    string
	Program string
	Package string
}

func (e *NotInstalled) Error() string {
	return fmt.Sprintf("%s: %s not installed — apt-get install %s", e.Peer, e.Program, e.Package)
}

// Missing returns a *NotInstalled error when a program of p is not on
// $PATH, else nil.
func (p *Peer) Missing() error {
	for _, prog := range p.Programs {
		if _, err := exec.LookPath(prog); err != nil {
			return &NotInstalled{Peer: p.Name, Program: prog, Package: p.Package}
		}
	}
	return nil
}

// Measures reports whether p measures shape.
func (p *Peer) Measures(shape string) bool { return slices.Contains(p.Shapes, shape) }

// MessagesPerIteration is 2 in ping-pong (there and back), 1 in a stream.
func MessagesPerIteration(shape string) int {
	if shape == Stream {
		return 1
	}
	return 2
}

// All returns the peers lmtbench knows, in the order of its tables.
func All() []*Peer {
	return []*Peer{
		openMPI("ompi", "Open MPI, default (vader; CMA single copy)", nil),
		openMPI("ompi-copy", "Open MPI, vader with single copy off (double copy through shared memory)",
			[]string{"--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none"}),
		mpich("mpich", "MPICH, default (ch4:ucx)", ""),
		mpich("mpich-posix", "MPICH, UCX_TLS=self,posix (double copy)", "self,posix"),
		ucx("ucx-posix", "UCX, UCX_TLS=posix (POSIX shared memory, double copy)", "posix"),
		ucx("ucx-sysv", "UCX, UCX_TLS=sysv (System V shared memory, double copy)", "sysv"),
		ucx("ucx-sm", "UCX, UCX_TLS=sm (posix, sysv and cma single copy for large messages)", "sm"),
		fabric(),
	}
}

// Lookup returns the peers named in a comma-separated list.
func Lookup(names string) ([]*Peer, error) {
	all := All()
	var out []*Peer
	for _, n := range strings.Split(names, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(all, func(p *Peer) bool { return p.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown peer %q (peers: %s)", n, strings.Join(Names(), ", "))
		}
		if !slices.Contains(out, all[i]) {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// Names lists the peers' names.
func Names() []string {
	var out []string
	for _, p := range All() {
		out = append(out, p.Name)
	}
	return out
}

// Unpackaged are benchmarks users know that Debian 12 does not package,
// so that lmtbench can say why they are absent.
var Unpackaged = []string{
	"OSU micro-benchmarks (osu_latency, osu_bw)",
	"Intel MPI Benchmarks (IMB-MPI1 PingPong)",
}
