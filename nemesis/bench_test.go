package nemesis

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/knemesis/knemesis/nemesis/launch"
)

// The ping-pong benchmarks run between two processes: the benchmark itself
// is rank 0 and re-executes the test binary as rank 1, which TestMain turns
// into an echo server (envEcho carries the job name and geometry).
const envEcho = "KNEMESIS_BENCH_ECHO"

const stopTag = MaxTag - 1

func TestMain(m *testing.M) {
	if spec := os.Getenv(envEcho); spec != "" {
		if err := echoServer(spec); err != nil {
			fmt.Fprintln(os.Stderr, "echo server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type benchSpec struct {
	job  string
	opts Options
	max  int // largest message
}

func (s benchSpec) String() string {
	return fmt.Sprintf("%s,%d,%d,%d,%d", s.job, s.opts.CellSize, s.opts.Cells, s.opts.FastboxSize, s.max)
}

func parseSpec(spec string) (benchSpec, error) {
	f := strings.Split(spec, ",")
	if len(f) != 5 {
		return benchSpec{}, fmt.Errorf("bad spec %q", spec)
	}
	var n [4]int
	for i := range n {
		v, err := strconv.Atoi(f[i+1])
		if err != nil {
			return benchSpec{}, fmt.Errorf("bad spec %q: %v", spec, err)
		}
		n[i] = v
	}
	return benchSpec{job: f[0], opts: Options{CellSize: n[0], Cells: n[1], FastboxSize: n[2]}, max: n[3]}, nil
}

func echoServer(spec string) error {
	s, err := parseSpec(spec)
	if err != nil {
		return err
	}
	ep, err := Join(s.job, 1, 2, &s.opts)
	if err != nil {
		return err
	}
	defer ep.Close()
	buf := make([]byte, s.max)
	for {
		st, err := ep.Recv(0, AnyTag, buf)
		if err != nil {
			return err
		}
		if st.Tag == stopTag {
			return nil
		}
		if err := ep.Send(0, st.Tag, buf[:st.Count]); err != nil {
			return err
		}
	}
}

// startEcho joins a two-rank job whose rank 1 is an echo server process.
func startEcho(b *testing.B, o Options, max int) *Endpoint {
	b.Helper()
	s := benchSpec{job: launch.NewJobName(), opts: o, max: max}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envEcho+"="+s.String())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ep, err := Join(s.job, 0, 2, &o)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ep.Send(1, stopTag, nil)
		ep.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("echo server: %v", err)
		}
	})
	return ep
}

func pingPong(b *testing.B, ep *Endpoint, size int) {
	msg := make([]byte, size)
	buf := make([]byte, size)
	for range 1000 { // warm up caches, branch predictors, the peer's spin
		ep.Send(1, 1, msg)
		ep.Recv(1, 1, buf)
	}
	b.SetBytes(int64(2 * size))
	b.ReportAllocs()
	// On a shared machine a preempted round trip weighs heavily in the
	// mean: also report the median over blocks of blockLen round trips.
	const blockLen = 256
	marks := make([]time.Time, 1, 1<<14)
	marks[0] = time.Now()
	i := 0
	for b.Loop() {
		if err := ep.Send(1, 1, msg); err != nil {
			b.Fatal(err)
		}
		if _, err := ep.Recv(1, 1, buf); err != nil {
			b.Fatal(err)
		}
		if i++; i%blockLen == 0 && len(marks) < cap(marks) {
			marks = append(marks, time.Now())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2000, "µs/oneway")
	if len(marks) > 2 {
		blocks := make([]float64, len(marks)-1)
		for j := range blocks {
			blocks[j] = float64(marks[j+1].Sub(marks[j]).Nanoseconds()) / blockLen / 2000
		}
		slices.Sort(blocks)
		b.ReportMetric(blocks[len(blocks)/2], "µs/oneway-median")
	}
}

// BenchmarkPingPong: one-way latency (round trip / 2) between two processes,
// through the fastbox and, with fastboxes off, through the queue.
func BenchmarkPingPong(b *testing.B) {
	for _, path := range []string{"fastbox", "queue"} {
		o := Options{}
		if path == "queue" {
			o.FastboxSize = -1
		}
		for _, size := range []int{0, 8, 64, 1024} {
			b.Run(fmt.Sprintf("%s/%d", path, size), func(b *testing.B) {
				pingPong(b, startEcho(b, o, size), size)
			})
		}
	}
}

// BenchmarkCellSize: how the cell size affects messages that take one or
// many cells (no LMT), and whether it costs small-message latency.
func BenchmarkCellSize(b *testing.B) {
	for _, cell := range []int{2048, 4096, 8192, 16384, 32768} {
		for _, size := range []int{8, 4000, 16000, 65536, 262144} {
			b.Run(fmt.Sprintf("cell=%d/msg=%d", cell, size), func(b *testing.B) {
				o := Options{CellSize: cell, FastboxSize: -1}
				pingPong(b, startEcho(b, o, size), size)
			})
		}
	}
}
