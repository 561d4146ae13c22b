// Package report turns raw samples into results and prints them: a human
// table, JSON, CSV, Go benchmark lines for benchstat, and a plot.
package report

import (
	"slices"
	"strconv"
	"strings"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

// Result is one (mode, backend, size) point. Its JSON form is one element
// of --json's array; CSVHeader documents its CSV form.
type Result struct {
	Mode      string `json:"mode"`
	Backend   string `json:"backend"` // the automatic choice is "auto"
	Reference bool   `json:"reference"`
	Size      int    `json:"size"`
	// Iterations, Messages and Seconds are those of the median sample.
	Iterations  int     `json:"iterations"`
	Messages    int     `json:"messages"`
	Seconds     float64 `json:"seconds"`
	BytesPerSec float64 `json:"bytes_per_sec"` // Messages × Size / Seconds
	LatencyUs   float64 `json:"latency_us"`    // Seconds / Messages: half the round trip in ping-pong; alltoall: Seconds / Iterations
	Procs       int     `json:"procs"`         // processes in the job
	// CopiesPerByte counts bytes copied per payload byte, by copier
	// ("user", "kernel", "dma"), when the copy probes ran; CopiesMode says
	// how they were counted.
	CopiesPerByte map[string]float64 `json:"copies_per_byte,omitempty"`
	CopiesMode    string             `json:"copies_mode,omitempty"`
	// CPUSecondsPerByte is the CPU time both ranks spent per payload byte
	// during the timed loop; PerRank splits it.
	CPUSecondsPerByte        float64    `json:"cpu_seconds_per_byte"`
	CPUSecondsPerBytePerRank [2]float64 `json:"cpu_seconds_per_byte_per_rank"`
	// Placement is "far", "near", "all" (the run's readings showed one
	// regime: machine.FindRegimes), "unknown" (no probe) or "mixed" (no
	// sample had the same placement before and after).
	Placement          string        `json:"placement"`
	PlacementLatencyUs float64       `json:"placement_latency_us"`
	Samples            int           `json:"samples"`
	SamplesKept        int           `json:"samples_kept"`
	CPUs               []int         `json:"cpus"` // CPU of rank 0 and rank 1; empty when unpinned
	Machine            machine.Facts `json:"machine"`
	// Pollution is the receiver's re-read slowdown (mode pollution only).
	Pollution *harness.PollutionSample `json:"pollution,omitempty"`
	// Rails is what each rail (by lmt.Rail: receiver read, sender
	// write, knem) moved of a message of the median sample, for a split
	// backend; zero otherwise.
	Rails [lmt.NumRails]int64 `json:"rails,omitempty"`
	// AutoVsBest compares auto with the best single backend in each
	// placement class; only auto's results carry it (CompareAuto).
	AutoVsBest *AutoVsBest `json:"auto_vs_best,omitempty"`
	// Peer marks a row of another stack, measured by its own benchmark
	// (lmtbench peers); VsPeers compares auto (and the Fastbox row)
	// with the best of them.
	Peer    *PeerInfo `json:"peer,omitempty"`
	VsPeers *VsPeers  `json:"vs_peers,omitempty"`
	// TypedVsPack is, on a typed row of lmtbench vector or indexed, its
	// throughput over the pack row's of the same mode and size, both
	// medians of the run (CompareTyped): above 1 the typed path beat
	// packing.
	TypedVsPack *float64 `json:"typed_vs_pack,omitempty"`
	// Path is how rank 0 reached its partner in a job a PMIx launcher
	// started (lmtbench under mpirun or srun): "shm" within a node, "net "
	// and the network module's provider between nodes ("net ofi
	// tcp;ofi_rxm"); Provider is that provider, empty on shm; Partner is
	// the partner's rank. All three are empty in the runs lmtbench
	// starts itself.
	Path     string `json:"path,omitempty"`
	Provider string `json:"provider,omitempty"`
	Partner  int    `json:"partner,omitempty"`
	// Pages is the page size the run asked for the buffers (lmtbench
	// --hugepages: "small" or "huge"); PagesGot, HugeBytes and
	// BufferBytes are what the median sample's ranks got
	// (harness.Sample).
	Pages       string   `json:"pages,omitempty"`
	PagesGot    string   `json:"pages_got,omitempty"`
	HugeBytes   [2]int64 `json:"huge_bytes,omitempty"`
	BufferBytes int64    `json:"buffer_bytes,omitempty"`

	kept []harness.Sample // the samples the median was taken over
	all  []harness.Sample // every sample, whatever its placement
}

// Aggregate keeps the samples whose placement was the same before and
// after, prefers far ones (the usual placement here; see
// ../shared/docs/baselines.md), and reports the median of those.
func Aggregate(mode, backend string, reference bool, samples []harness.Sample) Result {
	r := Result{Mode: mode, Backend: backend, Reference: reference, Samples: len(samples), Procs: 2, all: samples}
	if len(samples) == 0 {
		return r
	}
	r.Size = samples[0].Size
	byClass := map[string][]harness.Sample{}
	for _, s := range samples {
		if s.Before.Class == s.After.Class {
			byClass[s.Before.Class] = append(byClass[s.Before.Class], s)
		}
	}
	switch {
	case len(byClass["far"]) > 0:
		r.Placement, r.kept = "far", byClass["far"]
	case len(byClass["near"]) > 0:
		r.Placement, r.kept = "near", byClass["near"]
	case len(byClass[machine.All]) > 0:
		r.Placement, r.kept = machine.All, byClass[machine.All]
	case len(byClass["unknown"]) > 0:
		r.Placement, r.kept = "unknown", byClass["unknown"]
	default:
		r.Placement, r.kept = "mixed", samples
	}
	r.SamplesKept = len(r.kept)
	sorted := slices.Clone(r.kept)
	slices.SortFunc(sorted, func(a, b harness.Sample) int {
		x, y := a.Seconds/float64(a.Messages), b.Seconds/float64(b.Messages)
		if a.Pollution != nil && b.Pollution != nil {
			x, y = a.Pollution.Slowdown, b.Pollution.Slowdown
		}
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	// The lower median: with two samples, the one a preemption or a
	// neighbour's burst did not slow down.
	m := sorted[(len(sorted)-1)/2]
	var lat []float64
	for _, s := range r.kept {
		if s.Before.LatencyUs > 0 {
			lat = append(lat, s.Before.LatencyUs)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.PlacementLatencyUs = lat[len(lat)/2]
	}
	r.Iterations, r.Messages, r.Seconds, r.Pollution, r.Rails = m.Iterations, m.Messages, m.Seconds, m.Pollution, m.Rails
	r.PagesGot, r.HugeBytes, r.BufferBytes = m.Pages, m.HugeBytes, m.BufferBytes
	bytes := float64(m.Messages) * float64(m.Size)
	r.BytesPerSec = bytes / m.Seconds
	r.LatencyUs = m.Seconds / float64(m.Messages) * 1e6
	if mode == harness.Alltoall {
		// IMB reports an Alltoall by the time of one collective.
		r.LatencyUs = m.Seconds / float64(m.Iterations) * 1e6
	}
	if bytes > 0 {
		// Per byte means nothing for empty messages (latency from 0 B):
		// those keep 0 rather than an infinity JSON cannot carry.
		r.CPUSecondsPerBytePerRank = [2]float64{m.CPUSeconds[0] / bytes, m.CPUSeconds[1] / bytes}
		r.CPUSecondsPerByte = (m.CPUSeconds[0] + m.CPUSeconds[1]) / bytes
	}
	return r
}

// KeptSamples returns the samples the result's median was taken over.
func (r *Result) KeptSamples() []harness.Sample { return r.kept }

// In returns r aggregated over only its samples that began and ended in
// placement class ("near", "far"), and false when it has none.
func (r *Result) In(class string) (Result, bool) {
	var in []harness.Sample
	for _, s := range r.all {
		if s.Before.Class == class && s.After.Class == class {
			in = append(in, s)
		}
	}
	if len(in) == 0 {
		return Result{}, false
	}
	out := Aggregate(r.Mode, r.Backend, r.Reference, in)
	out.CPUs, out.Machine, out.Procs = r.CPUs, r.Machine, r.Procs
	return out, true
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, " ")
}
