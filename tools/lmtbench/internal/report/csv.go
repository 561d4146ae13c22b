package report

import (
	"encoding/csv"
	"encoding/json"
	"io"
	"strconv"
)

// CSVHeader is the --csv schema, one column per field:
//
//	mode                        pingpong, netpipe (pingpong --reuse), bidir, stream, latency or pollution
//	backend                     backend name; "auto" is the automatic choice
//	reference                   true for yardsticks that are not backends (memcpy)
//	size                        message size in bytes
//	iterations                  iterations of the median sample
//	messages                    messages moved by the median sample
//	seconds                     elapsed seconds of the median sample
//	bytes_per_sec               messages × size / seconds
//	latency_us                  seconds / messages, in µs (half the round trip in ping-pong); alltoall: seconds / iterations
//	procs                       processes in the job (2, or alltoall's -n)
//	copies_per_byte_user        bytes copied by user space per payload byte; empty when probes did not run
//	copies_per_byte_kernel      bytes copied by the kernel CPU per payload byte; empty likewise
//	copies_per_byte_dma         bytes copied by a DMA engine per payload byte; empty likewise
//	copies_mode                 how copies were counted (uprobe, tracepoint, fentry); empty likewise
//	cpu_seconds_per_byte        CPU seconds of both ranks per payload byte
//	cpu_seconds_per_byte_rank0  rank 0's share
//	cpu_seconds_per_byte_rank1  rank 1's share
//	placement                   far, near, unknown (no probe) or mixed
//	placement_latency_us        the probe's cache-line one-way latency, median over kept samples
//	samples                     samples taken
//	samples_kept                samples with the same placement before and after, of the reported class
//	pollution_working_set       pollution: bytes the receiver re-reads; empty in other modes
//	pollution_baseline_us       median re-read time with no transfer in between
//	pollution_after_us          median re-read time with one message received in between
//	pollution_slowdown          after / baseline
//	cpus                        CPUs of rank 0 and rank 1, space-separated; empty when unpinned
//	cpu_model, kernel, hostname, go   machine facts
//	peer_stack                  lmtbench peers: the stack a peer row measured; empty for the toolkit's rows
//	peer_command                the exact command line of a peer row's median sample
//	path                        under mpirun or srun: shm, or net and the provider ("net ofi tcp;ofi_rxm"); empty otherwise
//	provider                    under mpirun or srun: the network module's provider on a net path; empty otherwise
//	partner                     under mpirun or srun: the rank rank 0 measured with; empty otherwise
//	typed_vs_pack               vector, indexed: a typed row's throughput ÷ the pack row's; empty otherwise
var CSVHeader = []string{
	"mode", "backend", "reference", "size", "iterations", "messages", "seconds",
	"bytes_per_sec", "latency_us", "procs",
	"copies_per_byte_user", "copies_per_byte_kernel", "copies_per_byte_dma", "copies_mode",
	"cpu_seconds_per_byte", "cpu_seconds_per_byte_rank0", "cpu_seconds_per_byte_rank1",
	"placement", "placement_latency_us", "samples", "samples_kept",
	"pollution_working_set", "pollution_baseline_us", "pollution_after_us", "pollution_slowdown", "cpus",
	"cpu_model", "kernel", "hostname", "go", "peer_stack", "peer_command",
	"path", "provider", "partner", "typed_vs_pack",
}

// WriteCSV writes the header and one row per result.
func WriteCSV(w io.Writer, results []Result) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return err
	}
	for _, r := range results {
		copies := func(who string) string {
			v, ok := r.CopiesPerByte[who]
			if !ok {
				return ""
			}
			return g(v)
		}
		var pol [4]string
		if p := r.Pollution; p != nil {
			pol = [4]string{strconv.Itoa(p.WorkingSet), g(float64(p.BaselineNs) / 1e3), g(float64(p.AfterNs) / 1e3), g(p.Slowdown)}
		}
		var peer [2]string
		if r.Peer != nil {
			peer = [2]string{r.Peer.Stack, r.Peer.Command}
		}
		partner, vsPack := "", ""
		if r.Path != "" {
			partner = strconv.Itoa(r.Partner)
		}
		if r.TypedVsPack != nil {
			vsPack = g(*r.TypedVsPack)
		}
		row := []string{
			r.Mode, r.Backend, strconv.FormatBool(r.Reference), strconv.Itoa(r.Size),
			strconv.Itoa(r.Iterations), strconv.Itoa(r.Messages), g(r.Seconds),
			g(r.BytesPerSec), g(r.LatencyUs), strconv.Itoa(r.Procs),
			copies("user"), copies("kernel"), copies("dma"), r.CopiesMode,
			g(r.CPUSecondsPerByte), g(r.CPUSecondsPerBytePerRank[0]), g(r.CPUSecondsPerBytePerRank[1]),
			r.Placement, g(r.PlacementLatencyUs), strconv.Itoa(r.Samples), strconv.Itoa(r.SamplesKept),
			pol[0], pol[1], pol[2], pol[3], cpuList(r.CPUs), r.Machine.CPUModel, r.Machine.Kernel, r.Machine.Hostname, r.Machine.Go,
			peer[0], peer[1], r.Path, r.Provider, partner, vsPack,
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSON writes the results as one indented JSON array.
func WriteJSON(w io.Writer, results []Result) error {
	if results == nil {
		results = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results)
}

func g(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
