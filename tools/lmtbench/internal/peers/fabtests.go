package peers

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// fi_pingpong (libfabric-bin, from fabtests) runs as a server and a client
// that exchange addresses over TCP (-B on the server, -P on the client) and
// then ping-pong through a provider, here shm on an RDM endpoint. Its line
// of results is
//
//	bytes  #sent  #ack  total  time  MB/sec  usec/xfer  Mxfers/sec
//
// with sizes printed as fabtests' size_str does (1k, 1m: powers of 1024)
// and MB/sec in 10^6 bytes per second (bytes / elapsed microseconds, in
// fabtests' show_perf), counting both directions' transfers.

func fabric() *Peer {
	return &Peer{
		Name: "ofi-shm", Stack: "libfabric, shm provider (RDM endpoint)", Tool: "fi_pingpong", Package: "libfabric-bin",
		Shapes:   []string{PingPong},
		Programs: []string{"fi_pingpong", "taskset"},
		invocation: func(j Job) Invocation {
			port := strconv.Itoa(j.Port)
			common := []string{"-p", "shm", "-e", "rdm", "-I", strconv.Itoa(j.Iters), "-S", strconv.Itoa(j.Size)}
			server := append([]string{"fi_pingpong", "-B", port}, common...)
			client := append(append([]string{"fi_pingpong", "-P", port}, common...), "127.0.0.1")
			if j.CPUs != nil {
				client = append([]string{"taskset", "-c", strconv.Itoa(j.CPUs[0])}, client...)
				server = append([]string{"taskset", "-c", strconv.Itoa(j.CPUs[1])}, server...)
			}
			return Invocation{Server: server, Client: client, Port: j.Port}
		},
		parse: parseFabtests,
	}
}

// FabtestsMBps converts fabtests' MB/sec (10^6 bytes per second) to bytes
// per second.
func FabtestsMBps(mbps float64) float64 { return mbps * 1e6 }

// FabtestsSize parses fabtests' size_str: "8", "64k", "1m", "1.5k" (one
// decimal below 10 units).
func FabtestsSize(s string) (float64, error) {
	mul := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mul = 1 << 10
	case strings.HasSuffix(s, "m"):
		mul = 1 << 20
	case strings.HasSuffix(s, "g"):
		mul = 1 << 30
	}
	if mul != 1 {
		s = s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("fabtests size %q: %w", s, err)
	}
	return v * mul, nil
}

// FabtestsCount prints a count as fabtests' cnt_str does: 999, 12k, 3m,
// 1b (truncated, powers of 1000).
func FabtestsCount(n int) string {
	switch {
	case n >= 1e9:
		return strconv.Itoa(n/1e9) + "b"
	case n >= 1e6:
		return strconv.Itoa(n/1e6) + "m"
	case n >= 1e3:
		return strconv.Itoa(n/1e3) + "k"
	}
	return strconv.Itoa(n)
}

// parseFabtests reads the client's output: a header beginning "bytes",
// then the line of the size.
func parseFabtests(out []byte, j Job) (Measurement, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	seenHeader := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "bytes" {
			seenHeader = true
			continue
		}
		if !seenHeader || len(f) < 8 {
			continue
		}
		size, err := FabtestsSize(f[0])
		// size_str keeps one decimal below 10 units and none above:
		// the printed size is within a tenth of a unit of the real one.
		if err != nil || size > float64(j.Size) || float64(j.Size)-size >= float64(j.Size)/10+1 {
			continue
		}
		if f[1] != FabtestsCount(j.Iters) {
			return Measurement{}, fmt.Errorf("fi_pingpong line %q: sent %s, asked for %d iterations", sc.Text(), f[1], j.Iters)
		}
		mbps, err := strconv.ParseFloat(f[5], 64)
		if err != nil || mbps <= 0 {
			return Measurement{}, fmt.Errorf("fi_pingpong line %q: MB/sec %q is not a positive number", sc.Text(), f[5])
		}
		return Measurement{
			Size: j.Size, Iterations: j.Iters, Messages: 2 * j.Iters,
			BytesPerSec: FabtestsMBps(mbps),
		}, nil
	}
	return Measurement{}, fmt.Errorf("fi_pingpong printed no result for %d bytes (output %q)", j.Size, firstLine(out))
}
