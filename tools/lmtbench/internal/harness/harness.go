// Package harness runs the measurements of lmtbench inside the two ranks of
// a job and hands raw samples back to the parent process, which keeps the
// statistics (package report).
//
// The shapes are those of Ben Fredj and Renault, "The Critical's Path of
// Communication Model Analysis for a Performant Implementation of
// High-speed Interfaces over the Myrinet Interconnect": ping-pong (a
// message is sent only once the previous one has arrived, IMB's PingPong),
// bidirectional ping-pong (both ranks send at once, then receive) and burst,
// called stream here (the sender sends as fast as the engine lets it,
// without waiting for replies). In all three, latency is the elapsed time
// divided by the number of messages transmitted and throughput is that
// number times the size divided by the elapsed time; so ping-pong latency is
// half the round trip, as in IMB.
//
// Every sample is bracketed by the placement probe: an external program
// named by the user, run by rank 0 while rank 1 sleeps in a blocking read, or the built-in one,
// a cache line timed between ranks 0 and 1 (placement.go). Every size is first checked: the
// receiver verifies each byte of a patterned message, in both directions,
// before anything is timed.
package harness

import (
	"fmt"
	"time"

	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/threshold"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/pagebuf"
)

// Modes a job can run.
const (
	PingPong = "pingpong"
	// Pollution streams messages to rank 1, which re-reads a working set
	// after each one and without one in between (tools/copyprobe): how
	// much of the receiver's cache a transfer evicts.
	Pollution = "pollution"
	// Alltoall has every one of Procs ranks send a message to every other
	// at once, as MPI_Alltoall (ICPP 2009 §4.4: Buntinas, Goglin, Goodell,
	// Mercier and Moreaud, "Cache-Efficient, Intranode, Large-Message MPI
	// Communication with MPICH2-Nemesis").
	Alltoall = "alltoall"
	// Latency is ping-pong of small messages, 0 bytes and up.
	Latency = "latency"
	// NetPIPE is ping-pong where each rank sends back the very buffer it
	// just received, as NetPIPE does: the data to send is dirty in the
	// sender's cache, which halves single-copy backends on machines
	// whose cores share a cache (../shared/docs/baselines.md).
	NetPIPE = "netpipe"
	Bidir   = "bidir"
	Stream  = "stream"
	// Placement moves nothing: rank 0 reports one reading of the
	// built-in placement probe (ProbePlacement).
	Placement = "placement"
)

// MessagesPerIteration is how many messages one iteration of a mode moves.
func MessagesPerIteration(mode string) int {
	if mode == Stream || mode == Pollution {
		return 1
	}
	return 2
}

// VerifyMessages is how many messages the byte-by-byte check moves per size
// before timing: one each way, plus one each way through SendRecv for bidir.
// Copy counts include them.
func VerifyMessages(mode string) int {
	if mode == Bidir {
		return 4
	}
	return 2
}

// WarmupIterations is how many untimed iterations a job runs at a size
// before its first sample there: a quarter of a sample's, at least
// learnerRound, and learnerRound before calibrating when the sample's
// count is not given (worker.go). A job's first messages open its channels
// (a ring, a FIFO), fault their pages in and give auto its first round of
// explorations, which an application pays once per run and a short sample
// in a fresh job would pay every time. OSU's benchmarks skip 10 to 100
// iterations for the same reason. Pollution is not warmed up: its rounds
// time a cache, not a transfer.
func WarmupIterations(mode string, iters int) int {
	if mode == Pollution || mode == Placement {
		return 0
	}
	return max(learnerRound, iters/4)
}

// learnerRound is how many messages each sender's first exploration round
// of a size class takes at most in auto (threshold.Learner): a cold one
// and LearnerSamples counted ones by each method it weighs, the table's
// own choice included. Every iteration sends one message each way, so
// that many iterations leave auto settled; with fewer, a 64 MiB sample
// (one or two iterations) timed auto while it tried the slower methods.
var learnerRound = (len(auto.LearnedCandidates()) + 1) * (1 + threshold.LearnerSamples)

// RewarmIterations is how many untimed iterations run between a placement
// reading and the sample it brackets: a quarter of the sample's, at least
// 2. The probe runs while the ranks sleep on their pipes (an external probe
// is a process of its own on both CPUs), and the messages after it run
// slower than before for a few milliseconds: the ranks' caches, TLBs and
// ring went cold meanwhile. Timed, that transient lowers a short sample
// (docs/performance.md, tools/lmtbench). The reading still brackets the
// sample: nothing but the re-warm runs between them.
func RewarmIterations(mode string, iters int) int {
	if mode == Pollution || mode == Placement {
		return 0
	}
	return max(2, iters/4)
}

// DefaultWarmup is how long, at least, a job runs its first size untimed
// before its first sample (Spec.Warmup, settle). A freshly started pair
// of ranks can stream small messages well below its settled rate for its
// first tens of milliseconds, and a 15 ms sample in a fresh job, as every
// sample of an interleaved run is, then times mostly that
// (the figures: git log -S "Eighth wave-2 session" docs/performance.md). An
// application pays it once per run; the peers' own benchmarks run their
// warm-up and their samples in one process.
const DefaultWarmup = 100 * time.Millisecond

// Spec is what the parent asks a job to measure. It travels to the ranks
// as JSON in an environment variable.
type Spec struct {
	Mode       string        `json:"mode"`
	Backend    string        `json:"backend"`
	Sizes      []int         `json:"sizes"`
	Iters      int           `json:"iters"`       // fixed iterations per sample; 0 calibrates to SampleTime
	SampleTime time.Duration `json:"sample_time"` // target length of one sample
	Samples    int           `json:"samples"`     // samples per size
	CPUs       []int         `json:"cpus"`        // CPU of each rank; nil leaves them unpinned
	Probe      string        `json:"probe"`       // placement probe path, machine.Builtin, or "" for none
	WorkingSet int           `json:"working_set"` // pollution: bytes rank 1 re-reads
	Procs      int           `json:"procs"`       // alltoall: ranks in the job (2 otherwise)
	Warmup     time.Duration `json:"warmup"`      // least untimed run of the job's first size (settle)
	// Pages is the page size of the buffers the ranks allocate (their
	// receive buffers, and send buffers of engines without memory of
	// their own): pagebuf.Heap (Go slices), Small or Huge.
	Pages pagebuf.Kind `json:"pages,omitempty"`
}

func (s *Spec) procs() int {
	if s.Mode == Alltoall {
		return s.Procs
	}
	return 2
}

// Sample is one timed run of Iterations iterations at one size.
type Sample struct {
	Size       int               `json:"size"`
	Iterations int               `json:"iterations"`
	Messages   int               `json:"messages"`
	Seconds    float64           `json:"seconds"`
	CPUSeconds [2]float64        `json:"cpu_seconds"` // per rank, user+system, during the timed loop
	Before     machine.Placement `json:"before"`
	After      machine.Placement `json:"after"`
	Pollution  *PollutionSample  `json:"pollution,omitempty"`
	// Rails is what each rail (by lmt.Rail: receiver read, sender
	// write, knem) moved of the last message rank 1 received, when a
	// split backend carried it (engine.RailReporter); zero otherwise.
	Rails [lmt.NumRails]int64 `json:"rails,omitempty"`
	// Round is the round the parent took the sample in: in one round it
	// measures each backend once at a size, back to back, so samples of
	// one round and size are comparable (see package report's CompareAuto).
	Round int `json:"round"`
	// Pages is what rank 0's first pagebuf buffer got ("4KiB", "thp",
	// "hugetlb"), empty when the buffers are Go slices; HugeBytes is, per
	// rank, how many bytes of its send and receive buffers smaps showed
	// mapped by huge pages once touched, out of BufferBytes each.
	Pages       string   `json:"pages,omitempty"`
	HugeBytes   [2]int64 `json:"huge_bytes,omitempty"`
	BufferBytes int64    `json:"buffer_bytes,omitempty"`
}

// PollutionSample is what rank 1 measured in a pollution sample: the median
// time to re-read its working set with no transfer since the last read, and
// with one message received in between.
type PollutionSample struct {
	WorkingSet int     `json:"working_set"`
	Rounds     int     `json:"rounds"`
	BaselineNs int64   `json:"baseline_ns"`
	AfterNs    int64   `json:"after_ns"`
	Slowdown   float64 `json:"slowdown"`
	// Misses are cache misses of the re-reads, when MissesNote is empty.
	BaselineMisses uint64 `json:"baseline_misses,omitempty"`
	AfterMisses    uint64 `json:"after_misses,omitempty"`
	MissesNote     string `json:"misses_note,omitempty"`
}

// Validate checks a Spec before a job is started for it.
func (s *Spec) Validate() error {
	switch s.Mode {
	case PingPong, NetPIPE, Bidir, Stream, Pollution, Latency, Alltoall:
	case Placement:
		if s.Probe != machine.Builtin {
			return fmt.Errorf("a placement job reads the built-in probe, not %q", s.Probe)
		}
		return nil
	default:
		return fmt.Errorf("unknown mode %q", s.Mode)
	}
	if len(s.Sizes) == 0 {
		return fmt.Errorf("no sizes to measure")
	}
	for _, n := range s.Sizes {
		if n < 1 && s.Mode != Latency || n < 0 {
			return fmt.Errorf("a %d-byte message means nothing to %s", n, s.Mode)
		}
	}
	if s.Mode == Pollution && (s.Iters < 1 || s.WorkingSet < 128) {
		return fmt.Errorf("pollution needs --iters rounds and a working set of at least 128 bytes")
	}
	if s.Mode == Alltoall && (s.Procs < 2 || s.Procs > len(s.CPUs) && s.CPUs != nil) {
		return fmt.Errorf("alltoall needs at least 2 processes and one CPU each, got %d for CPUs %v", s.Procs, s.CPUs)
	}
	switch {
	case s.Pages == pagebuf.Heap:
	case s.Pages != pagebuf.Small && s.Pages != pagebuf.Huge:
		return fmt.Errorf("page kind %q: want small or huge", s.Pages)
	case s.Mode != PingPong && s.Mode != NetPIPE && s.Mode != Bidir && s.Mode != Stream:
		return fmt.Errorf("%s buffers are not placed by page size; pingpong, netpipe, bidir and stream are", s.Mode)
	}
	if s.Iters < 0 || s.Samples < 1 || (s.Iters == 0 && s.SampleTime <= 0) {
		return fmt.Errorf("need --iters > 0 or --time > 0, and at least one sample")
	}
	return nil
}
