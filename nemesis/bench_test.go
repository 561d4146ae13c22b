package nemesis

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// The ping-pong benchmarks run between two processes: the benchmark itself
// is rank 0 and re-executes the test binary as rank 1, which TestMain turns
// into an echo server (envEcho carries the job name and geometry).
const envEcho = "KNEMESIS_BENCH_ECHO"

const stopTag = MaxTag - 1

// sinkTag marks the messages the echo server takes without answering
// (BenchmarkStream).
const sinkTag = MaxTag - 2

func TestMain(m *testing.M) {
	if path := os.Getenv(envRawEcho); path != "" {
		if err := rawEcho(path); err != nil {
			fmt.Fprintln(os.Stderr, "raw echo:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if spec := os.Getenv(envLoneCreator); spec != "" {
		loneCreator(spec) // never returns: the test kills it
	}
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
	job   string
	opts  Options
	max   int // largest message
	procs int // job size; ranks past 1 only wait for the stop message
	rank  int
}

func (s benchSpec) String() string {
	return fmt.Sprintf("%s,%d,%d,%d,%d,%d,%d", s.job, s.opts.CellSize, s.opts.Cells, s.opts.FastboxSize, s.max, s.procs, s.rank)
}

func parseSpec(spec string) (benchSpec, error) {
	f := strings.Split(spec, ",")
	if len(f) != 7 {
		return benchSpec{}, fmt.Errorf("bad spec %q", spec)
	}
	var n [6]int
	for i := range n {
		v, err := strconv.Atoi(f[i+1])
		if err != nil {
			return benchSpec{}, fmt.Errorf("bad spec %q: %v", spec, err)
		}
		n[i] = v
	}
	return benchSpec{job: f[0], opts: Options{CellSize: n[0], Cells: n[1], FastboxSize: n[2]}, max: n[3], procs: n[4], rank: n[5]}, nil
}

func echoServer(spec string) error {
	s, err := parseSpec(spec)
	if err != nil {
		return err
	}
	ep, err := Join(s.job, s.rank, s.procs, &s.opts)
	if err != nil {
		return err
	}
	defer ep.Close()
	if s.rank > 1 {
		// An idle rank: blocked in a receive (dozing) until the end.
		_, err := ep.Recv(0, stopTag, nil)
		return err
	}
	buf := make([]byte, s.max)
	for {
		st, err := ep.Recv(0, AnyTag, buf)
		if err != nil {
			return err
		}
		if st.Tag == stopTag {
			return nil
		}
		if st.Tag == sinkTag {
			continue
		}
		if err := ep.Send(0, st.Tag, buf[:st.Count]); err != nil {
			return err
		}
	}
}

// startEcho joins a two-rank job whose rank 1 is an echo server process.
func startEcho(b *testing.B, o Options, max int) *Endpoint { return startEchoJob(b, o, max, 2) }

// startEchoJob joins a job of procs ranks: rank 1 is an echo server
// process, ranks 2.. are processes blocked in a receive until the end.
func startEchoJob(b *testing.B, o Options, max, procs int) *Endpoint {
	b.Helper()
	job := launch.NewJobName()
	cmds := make([]*exec.Cmd, 0, procs-1)
	stop := func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}
	for rank := 1; rank < procs; rank++ {
		s := benchSpec{job: job, opts: o, max: max, procs: procs, rank: rank}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envEcho+"="+s.String())
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			stop()
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	ep, err := Join(job, 0, procs, &o)
	if err != nil {
		stop()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for r := 1; r < procs; r++ {
			ep.Send(r, stopTag, nil)
		}
		ep.Close()
		for _, c := range cmds {
			if err := c.Wait(); err != nil {
				b.Errorf("rank of the echo job: %v", err)
			}
		}
	})
	return ep
}

func pingPong(b *testing.B, ep *Endpoint, size int) { pingPongShaped(b, ep, size, false) }

// pingPongShaped is pingPong with, when vec, each side's buffer cut into a
// list of three entries, one of them empty (Sendv, Recvv).
func pingPongShaped(b *testing.B, ep *Endpoint, size int, vec bool) {
	msg := make([]byte, size)
	buf := make([]byte, size)
	msgv := [][]byte{msg[:size/2], nil, msg[size/2:]}
	bufv := [][]byte{buf[:size/3], buf[size/3:], nil}
	roundTrip := func() error {
		if !vec {
			if err := ep.Send(1, 1, msg); err != nil {
				return err
			}
			_, err := ep.Recv(1, 1, buf)
			return err
		}
		if err := ep.Sendv(1, 1, msgv); err != nil {
			return err
		}
		_, err := ep.Recvv(1, 1, bufv)
		return err
	}
	for range 1000 { // warm up caches, branch predictors, the peer's spin
		roundTrip()
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
		if err := roundTrip(); err != nil {
			b.Fatal(err)
		}
		if i++; i%blockLen == 0 && len(marks) < cap(marks) {
			marks = append(marks, time.Now())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2000, "µs/oneway")
	reportBlockMedian(b, marks, blockLen)
}

// BenchmarkPingPong: one-way latency (round trip / 2) between two processes,
// through the fastbox and, with fastboxes off, through the queue; "iov"
// sends and receives lists of three entries (the echo side keeps one
// buffer).
func BenchmarkPingPong(b *testing.B) {
	for _, path := range []string{"fastbox", "queue", "fastbox-iov", "queue-iov"} {
		o := Options{}
		if strings.HasPrefix(path, "queue") {
			o.FastboxSize = -1
		}
		vec := strings.HasSuffix(path, "-iov")
		for _, size := range []int{0, 8, 64, 1024} {
			b.Run(fmt.Sprintf("%s/%d", path, size), func(b *testing.B) {
				pingPongShaped(b, startEcho(b, o, size), size, vec)
			})
		}
	}
}

// BenchmarkStream: messages one way between two processes, the sender
// not waiting for replies (lmtbench's stream shape, Nemesis alone): ns per
// message, from the first send to the echo of a last one, and the share of
// messages that left by cells, which the line ring and the hold exist to
// avoid (8 B take one slot of the line ring, 40 B two, 64 B fastboxes).
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{8, 40, 64} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			ep := startEcho(b, Options{}, size)
			msg := make([]byte, size)
			drain := func() {
				if err := ep.Send(1, 1, nil); err != nil {
					b.Fatal(err)
				}
				if _, err := ep.Recv(1, 1, nil); err != nil {
					b.Fatal(err)
				}
			}
			for range 10000 {
				ep.Send(1, sinkTag, msg)
			}
			drain()
			before := ep.Stats()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := ep.Send(1, sinkTag, msg); err != nil {
					b.Fatal(err)
				}
			}
			drain()
			b.StopTimer()
			after := ep.Stats()
			b.ReportMetric(float64(after.QueueMsgs-before.QueueMsgs)/float64(b.N), "cells/msg")
		})
	}
}

// BenchmarkPairInBigJob: one pair's ping-pong, 8 B (latency) and 1 MiB
// (throughput, through cells: no LMT), in a job of 2 and in a job of 64
// whose 62 other ranks are blocked in a receive. The pair starts once
// all of them sleep (waitAsleep). After each size it
// prints both sides and their ratio (the 64-rank job's time over the
// 2-rank job's: the aim is at most 1.1):
//
//	go test -run '^$' -bench PairInBigJob -benchtime 2s ./nemesis/
func BenchmarkPairInBigJob(b *testing.B) {
	for _, size := range []int{8, 1 << 20} {
		var oneway [2]float64 // µs, by job: 2 ranks, 64 ranks
		for i, procs := range []int{2, 64} {
			b.Run(fmt.Sprintf("procs=%d/%d", procs, size), func(b *testing.B) {
				ep := startEchoJob(b, Options{}, size, procs)
				launchtest.WaitChildrenAsleep(b, time.Minute)
				pingPong(b, ep, size)
				oneway[i] = float64(b.Elapsed().Nanoseconds()) / float64(b.N) / 2000
			})
		}
		if oneway[0] > 0 && oneway[1] > 0 {
			mbs := func(us float64) float64 { return float64(size) / us }
			fmt.Printf("pair, %d B: 2-rank job %.3f µs one way (%.0f MB/s), 64-rank job %.3f µs (%.0f MB/s): ratio %.2f\n",
				size, oneway[0], mbs(oneway[0]), oneway[1], mbs(oneway[1]), oneway[1]/oneway[0])
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

// envRawEcho makes a child the far end of BenchmarkRawLine.
const envRawEcho = "KNEMESIS_BENCH_RAW_ECHO"

// mapLine maps the first page of the file at path and returns its first
// word: the one cache line the raw ping-pong bounces.
func mapLine(path string) (*atomic.Uint64, func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return (*atomic.Uint64)(unsafe.Pointer(&mem[0])), func() { unix.Munmap(mem) }, nil
}

// rawEcho answers every odd value with the next even one, until it reads
// the stop value.
func rawEcho(path string) error {
	line, unmap, err := mapLine(path)
	if err != nil {
		return err
	}
	defer unmap()
	const stop = math.MaxUint64
	for seen := uint64(0); ; {
		v := line.Load()
		if v == stop {
			return nil
		}
		if v != seen && v&1 == 1 {
			seen = v + 1
			line.Store(seen)
		}
	}
}

// BenchmarkRawLine is the floor under BenchmarkPingPong, measured in the
// same run: two processes bouncing one cache line, no queue, no matching
// (the Go twin of the C ping-pong in placement-probe). Compare ratios.
func BenchmarkRawLine(b *testing.B) {
	f, err := os.CreateTemp("/dev/shm", "knemesis-rawline-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	if err := f.Truncate(4096); err != nil {
		b.Fatal(err)
	}
	f.Close()
	line, unmap, err := mapLine(f.Name())
	if err != nil {
		b.Fatal(err)
	}
	defer unmap()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRawEcho+"="+f.Name())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	v := uint64(0)
	bounce := func() {
		v++
		line.Store(v)
		for line.Load() != v+1 {
		}
		v++
	}
	for range 1000 {
		bounce()
	}
	const blockLen = 256
	marks := make([]time.Time, 1, 1<<14)
	marks[0] = time.Now()
	i := 0
	for b.Loop() {
		bounce()
		if i++; i%blockLen == 0 && len(marks) < cap(marks) {
			marks = append(marks, time.Now())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2000, "µs/oneway")
	reportBlockMedian(b, marks, blockLen)
	line.Store(math.MaxUint64)
	if err := cmd.Wait(); err != nil {
		b.Errorf("raw echo: %v", err)
	}
}

func reportBlockMedian(b *testing.B, marks []time.Time, blockLen int) {
	if len(marks) > 2 {
		blocks := make([]float64, len(marks)-1)
		for j := range blocks {
			blocks[j] = float64(marks[j+1].Sub(marks[j]).Nanoseconds()) / float64(blockLen) / 2000
		}
		slices.Sort(blocks)
		b.ReportMetric(blocks[len(blocks)/2], "µs/oneway-median")
	}
}

// BenchmarkInProcessSendRecv is the software of the small-message path
// alone: both endpoints of a pair in one goroutine, so no line crosses
// between cores, each iteration a blocking Send and the Recv that takes
// it. 8 bytes take one slot of the line ring, 40 bytes two, 64 bytes a
// fastbox.
func BenchmarkInProcessSendRecv(b *testing.B) {
	for _, size := range []int{8, 40, 64} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			eps := joinLocal(b, 2, nil)
			a, c := eps[0], eps[1]
			msg, buf := make([]byte, size), make([]byte, size)
			b.ReportAllocs()
			for b.Loop() {
				if err := a.Send(1, 3, msg); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Recv(0, 3, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
