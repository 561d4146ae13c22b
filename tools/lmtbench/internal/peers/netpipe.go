package peers

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// NetPIPE (netpipe-openmpi's NPopenmpi, netpipe-mpich2's NPmpich2) runs
// under the MPI stack's own launcher. Rank 0 times nrepeat (-n) round
// trips of one size (-l = -u, no perturbation: -p 0), three trials, and
// writes to -o the best trial as "size Mbps seconds": seconds per message
// (half the round trip; with -s, the sender's time per message) and Mbps
// in units of 2^20 bits per second (NetPIPE.c: bits / (t * 1024 * 1024)).
// Without -I NetPIPE sends back the buffer it just received, so its
// ping-pong is lmtbench's netpipe shape.

// netpipeArgs are NetPIPE's arguments for j.
func netpipeArgs(program string, j Job) []string {
	size := strconv.Itoa(j.Size)
	args := []string{program, "-l", size, "-u", size, "-p", "0", "-n", strconv.Itoa(j.Iters)}
	if j.Shape == Stream {
		args = append(args, "-s")
	}
	return append(args, "-o", j.OutFile)
}

func openMPI(name, stack string, mca []string) *Peer {
	return &Peer{
		Name: name, Stack: stack, Tool: "NetPIPE (NPopenmpi)", Package: "netpipe-openmpi",
		Shapes:   []string{NetPIPE, Stream},
		Programs: []string{"mpirun.openmpi", "NPopenmpi"},
		invocation: func(j Job) Invocation {
			cmd := []string{"mpirun.openmpi"}
			if j.Root {
				cmd = append(cmd, "--allow-run-as-root")
			}
			cmd = append(cmd, "-np", "2")
			if j.CPUs != nil {
				cmd = append(cmd, "--bind-to", "cpu-list:ordered", "--cpu-set", cpuList(j.CPUs))
			} else {
				cmd = append(cmd, "--bind-to", "none")
			}
			if j.ShmDir != "" {
				cmd = append(cmd, "--mca", "btl_vader_backing_directory", j.ShmDir)
			}
			cmd = append(cmd, mca...)
			return Invocation{Client: append(cmd, netpipeArgs("NPopenmpi", j)...), OutFile: j.OutFile}
		},
		parse: parseNetPIPE,
	}
}

// mpich runs NPmpich2 under MPICH's hydra; tls, when set, is UCX_TLS for
// both ranks (MPICH's ch4 device here is UCX).
func mpich(name, stack, tls string) *Peer {
	return &Peer{
		Name: name, Stack: stack, Tool: "NetPIPE (NPmpich2)", Package: "netpipe-mpich2",
		Shapes:   []string{NetPIPE, Stream},
		Programs: []string{"mpiexec.mpich", "NPmpich2"},
		invocation: func(j Job) Invocation {
			cmd := []string{"mpiexec.mpich", "-n", "2"}
			if j.CPUs != nil {
				cmd = append(cmd, "-bind-to", "user:"+cpuList(j.CPUs))
			} else {
				cmd = append(cmd, "-bind-to", "none")
			}
			if tls != "" {
				cmd = append(cmd, "-genv", "UCX_TLS", tls)
			}
			return Invocation{Client: append(cmd, netpipeArgs("NPmpich2", j)...), OutFile: j.OutFile}
		},
		parse: parseNetPIPE,
	}
}

// NetPIPEMbps converts NetPIPE's Mbps (2^20 bits per second) to bytes
// per second.
func NetPIPEMbps(mbps float64) float64 { return mbps * (1 << 20) / 8 }

// parseNetPIPE reads the -o file: one line "size Mbps seconds" per size.
func parseNetPIPE(out []byte, j Job) (Measurement, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		size, err := strconv.Atoi(f[0])
		if err != nil || size != j.Size {
			continue
		}
		mbps, err := strconv.ParseFloat(f[1], 64)
		if err != nil || mbps <= 0 {
			return Measurement{}, fmt.Errorf("NetPIPE line %q: Mbps %q is not a positive number", sc.Text(), f[1])
		}
		return Measurement{
			Size: j.Size, Iterations: j.Iters, Messages: j.Iters * MessagesPerIteration(j.Shape),
			BytesPerSec: NetPIPEMbps(mbps),
		}, nil
	}
	return Measurement{}, fmt.Errorf("NetPIPE wrote no line for %d bytes (output %q)", j.Size, firstLine(out))
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

func firstLine(b []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line
}
