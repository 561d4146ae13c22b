package peers

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ucx_perftest (ucx-utils) runs as a server and a client that meet over
// TCP (-p) and then talk through the transports of UCX_TLS. tag_lat is
// ping-pong between separate send and receive buffers (IMB's shape) and
// reports the latency of one message, half the round trip; tag_bw streams
// messages from the client. With -v the client prints CSV whose
// overall_bw column is in MB/s of 2^20 bytes (libperf divides by
// UCS_MBYTE). The warm-up (-w) is lmtbench's: a quarter of the timed
// iterations, at least 12, instead of ucx_perftest's 10000.

func ucx(name, stack, tls string) *Peer {
	return &Peer{
		Name: name, Stack: stack, Tool: "ucx_perftest", Package: "ucx-utils",
		Shapes:   []string{PingPong, Stream},
		Programs: []string{"ucx_perftest"},
		invocation: func(j Job) Invocation {
			port := strconv.Itoa(j.Port)
			server := []string{"ucx_perftest", "-p", port}
			client := []string{"ucx_perftest", "127.0.0.1", "-p", port}
			if j.CPUs != nil {
				client = append(client, "-c", strconv.Itoa(j.CPUs[0]))
				server = append(server, "-c", strconv.Itoa(j.CPUs[1]))
			}
			test := "tag_lat"
			if j.Shape == Stream {
				test = "tag_bw"
			}
			client = append(client, "-t", test, "-s", strconv.Itoa(j.Size),
				"-n", strconv.Itoa(j.Iters), "-w", strconv.Itoa(max(12, j.Iters/4)), "-v")
			return Invocation{Env: []string{"UCX_TLS=" + tls}, Server: server, Client: client, Port: j.Port}
		},
		parse: parseUCX,
	}
}

// UCXMBps converts ucx_perftest's MB/s (2^20 bytes per second) to bytes
// per second.
func UCXMBps(mbps float64) float64 { return mbps * (1 << 20) }

// parseUCX reads the client's CSV: a header naming the columns, then one
// line per report; the last is the whole run.
func parseUCX(out []byte, j Job) (Measurement, error) {
	var header, last []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), ",")
		switch {
		case f[0] == "iterations":
			header = f
		case header != nil && len(f) == len(header):
			if _, err := strconv.Atoi(f[0]); err == nil {
				last = f
			}
		}
	}
	if header == nil || last == nil {
		return Measurement{}, fmt.Errorf("ucx_perftest printed no CSV result (output %q)", firstLine(out))
	}
	col := slices.Index(header, "overall_bw")
	if col < 0 {
		return Measurement{}, fmt.Errorf("ucx_perftest CSV header %q has no overall_bw column", strings.Join(header, ","))
	}
	mbps, err := strconv.ParseFloat(strings.TrimSpace(last[col]), 64)
	if err != nil || mbps <= 0 {
		return Measurement{}, fmt.Errorf("ucx_perftest overall_bw %q is not a positive number", last[col])
	}
	iters, _ := strconv.Atoi(strings.TrimSpace(last[0]))
	if iters != j.Iters {
		return Measurement{}, fmt.Errorf("ucx_perftest ran %d iterations, asked for %d", iters, j.Iters)
	}
	return Measurement{
		Size: j.Size, Iterations: iters, Messages: iters * MessagesPerIteration(j.Shape),
		BytesPerSec: UCXMBps(mbps),
	}, nil
}
