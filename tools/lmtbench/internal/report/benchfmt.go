package report

import (
	"fmt"
	"io"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

var benchNames = map[string]string{"pingpong": "PingPong", "latency": "Latency", "netpipe": "NetPIPE", "bidir": "Bidir", "stream": "Stream"}

// WriteBenchfmt prints the results in the Go benchmark format, one line per
// kept sample, so that `benchstat old.txt new.txt` compares two runs with
// its own statistics:
//
//	BenchmarkPingPong/backend=memcpy/size=4K  30000  410.2 ns/op  9985.12 MB/s  0.100 cpu-ns/B
//
// ns/op is the time per message (half the round trip in ping-pong).
func WriteBenchfmt(w io.Writer, results []Result) error {
	if len(results) > 0 {
		m := results[0].Machine
		fmt.Fprintf(w, "goos: linux\ngoarch: amd64\npkg: github.com/knemesis/knemesis/tools/lmtbench\ncpu: %s\n", m.CPUModel)
	}
	for _, r := range results {
		if p := r.Pollution; p != nil {
			for _, s := range r.kept {
				if s.Pollution == nil {
					continue
				}
				_, err := fmt.Fprintf(w, "BenchmarkPollution/backend=%s/size=%s/ws=%s\t%d\t%d ns/op\t%.4f slowdown\n",
					r.Backend, units.Format(r.Size), units.Format(p.WorkingSet), s.Pollution.Rounds, s.Pollution.AfterNs, s.Pollution.Slowdown)
				if err != nil {
					return err
				}
			}
			continue
		}
		for _, s := range r.kept {
			bytes := float64(s.Messages) * float64(s.Size)
			line := fmt.Sprintf("Benchmark%s/backend=%s/size=%s\t%d\t%.1f ns/op",
				benchNames[r.Mode], r.Backend, units.Format(r.Size), s.Messages, s.Seconds/float64(s.Messages)*1e9)
			if bytes > 0 {
				line += fmt.Sprintf("\t%.2f MB/s\t%.4f cpu-ns/B", bytes/s.Seconds/1e6, (s.CPUSeconds[0]+s.CPUSeconds[1])/bytes*1e9)
			}
			_, err := fmt.Fprintln(w, line)
			if err != nil {
				return err
			}
		}
	}
	return nil
}
