package rawbench_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/internal/knobs"
	"github.com/knemesis/knemesis/lmt/internal/rawbench"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	_ "github.com/knemesis/knemesis/pipe"
	"github.com/knemesis/knemesis/pipe/fifo"
	_ "github.com/knemesis/knemesis/vmsplice"
	"golang.org/x/sys/unix"
)

// The Go side of each benchmark runs through the real endpoint path
// (nemesis queues for RTS, CTS and DONE; attach; the backend) between
// this process (rank 0) and a peer process (rank 1) started
// from the same test binary: TestMain sees envPeer and serves commands
// instead of running tests.
const envPeer = "KNEMESIS_LMT_BENCH_PEER"

// window is how many messages the streaming sender keeps in flight.
const window = 2

// eagerMax keeps 64 KiB messages on the LMT path, and a message of
// KNEMESIS_BENCH_SIZE bytes too.
var eagerMax = func() int {
	if benchSize > 1 {
		return min(32<<10, benchSize-1)
	}
	return 32 << 10
}()

// benchSize, from KNEMESIS_BENCH_SIZE, replaces the benchmark's sizes with
// one: a message of a few bytes forced through the LMT shows the protocol's
// fixed cost per message, which a 64 KiB copy dilutes.
var benchSize, _ = strconv.Atoi(os.Getenv("KNEMESIS_BENCH_SIZE"))

const tagCmd = 1000

var sizes = []int{64 << 10, 1 << 20, 4 << 20, 16 << 20}

func benchSizes() []int {
	if benchSize > 1 {
		return []int{benchSize}
	}
	return sizes
}

func sizeName(size int) string {
	if size%1024 != 0 {
		return fmt.Sprintf("%dB", size)
	}
	return fmt.Sprintf("%dKiB", size>>10)
}

// mechanism of each backend in the C reference. The pushing ones (cma-write,
// cma-split) wait in C as in Go for the receiver to say where to write, the
// CTS every rendezvous needs; raw.c's cma-split-preset shows what knowing
// the address in advance would gain.
var raw = map[string]string{"shm": "shm", "cma": "cma", "cma-write": "cma-write", "cma-split": "cma-split", "pipe": "pipe", "vmsplice": "vmsplice"}

func TestMain(m *testing.M) {
	if job := os.Getenv(envPeer); job != "" {
		os.Exit(servePeer(job))
	}
	code := m.Run()
	if peer != nil {
		// Leaving cleanly lets the peer's endpoint see the job end
		// and the rings and FIFOs go away.
		peer.l.Close()
		peer.ep.Close()
	}
	os.Exit(code)
}

// pin puts the calling goroutine on cpu when KNEMESIS_BENCH_PIN is set. On
// a VM shared with other work, pinned processes cannot flee a busy vCPU and
// the figures collapse for C and Go alike, so pinning is opt-in.
func pin(cpu int) {
	if os.Getenv("KNEMESIS_BENCH_PIN") == "" {
		return
	}
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu % runtime.NumCPU())
	_ = unix.SchedSetaffinity(0, &set)
}

type side struct {
	ep   *nemesis.Endpoint
	l    *attach.LMT
	bufs [window][]byte
	recv [window][]byte
	reqs [window]nemesis.Request
}

func newSide(job string, rank int) (*side, error) {
	ep, err := nemesis.Join(job, rank, 2, nil)
	if err != nil {
		return nil, err
	}
	l, err := attach.Attach(ep, attach.Options{EagerMax: eagerMax, Tune: func(c *lmt.Config) {
		// Knobs for exploring the engine's shape from the command line;
		// the peer inherits them, so both ranks agree on the ring.
		if v, _ := strconv.Atoi(os.Getenv("KNEMESIS_BENCH_CHUNK")); v > 0 {
			c.Chunk = v
		}
		if v, _ := strconv.Atoi(os.Getenv("KNEMESIS_BENCH_SHM_SLOTS")); v > 0 {
			c.ShmSlots = v
		}
		if v, _ := strconv.Atoi(os.Getenv("KNEMESIS_BENCH_SHM_SLOT_SIZE")); v > 0 {
			c.ShmSlotSize = v
		}
		knobs.Set(c, knobs.Knobs{
			NoEarly:      os.Getenv("KNEMESIS_BENCH_NOEARLY") != "",
			NoBuffered:   os.Getenv("KNEMESIS_BENCH_NOBUFFERED") != "",
			NoGrantAhead: os.Getenv("KNEMESIS_BENCH_NOGRANTAHEAD") != "",
		})
	}})
	if err != nil {
		return nil, err
	}
	return &side{ep: ep, l: l}, nil
}

// buffers makes the send and receive buffers of one size and writes every
// page of both, as raw.c does with memset: a large allocation comes fresh
// from the kernel, and a receive buffer left untouched would take its page
// faults inside the timed transfers (4096 a 16 MiB buffer) where C's takes
// none.
func (s *side) buffers(size int) {
	for i := range s.bufs {
		if len(s.bufs[i]) != size {
			s.bufs[i] = make([]byte, size)
			s.recv[i] = make([]byte, size)
			for j := range s.bufs[i] {
				s.bufs[i][j] = byte(j)
			}
			for j := range s.recv[i] {
				s.recv[i][j] = 3
			}
		}
	}
}

// stream sends (or receives) n messages with window in flight.
func (s *side) stream(peer int, sender bool, backend string, n int) error {
	for i := 0; i < n+window; i++ {
		k := i % window
		r := &s.reqs[k]
		if i >= window {
			if err := s.wait(r); err != nil {
				return err
			}
		}
		if i >= n {
			continue
		}
		var err error
		if sender {
			err = s.l.Isend(r, peer, 0, s.bufs[k], backend)
		} else {
			err = s.ep.Irecv(r, peer, 0, s.recv[k])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// wait is Endpoint.Wait, the one wait there is: it sleeps on the LMT's
// pipes through the hook attach installs (nemesis.LMTPoller).
func (s *side) wait(r *nemesis.Request) error { return s.ep.Wait(r) }

func (s *side) pingpong(peer int, first bool, backend string, n int) error {
	r := &s.reqs[0]
	for i := 0; i < n; i++ {
		for turn := 0; turn < 2; turn++ {
			var err error
			if (turn == 0) == first {
				err = s.l.Isend(r, peer, 0, s.bufs[0], backend)
			} else {
				err = s.ep.Irecv(r, peer, 0, s.recv[0])
			}
			if err == nil {
				err = s.wait(r)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func servePeer(job string) int {
	pin(1)
	s, err := newSide(job, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench peer:", err)
		return 1
	}
	defer s.ep.Close()
	cmd := make([]byte, 256)
	for {
		st, err := s.ep.Recv(0, tagCmd, cmd)
		if err != nil {
			return 0 // the benchmark process is gone
		}
		f := strings.Fields(string(cmd[:st.Count]))
		if len(f) != 4 {
			return 0
		}
		size, _ := strconv.Atoi(f[2])
		n, _ := strconv.Atoi(f[3])
		s.buffers(size)
		if err := s.ep.Send(0, tagCmd, []byte("ready")); err != nil {
			return 1
		}
		if f[0] == "stream" {
			err = s.stream(0, false, f[1], n)
		} else {
			err = s.pingpong(0, false, f[1], n)
		}
		if err == nil {
			err = s.ep.Send(0, tagCmd, []byte("done"))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench peer:", err)
			return 1
		}
	}
}

var (
	peerOnce sync.Once
	peer     *side
	peerErr  error
	peerProc *os.Process
)

func startPeer() (*side, error) {
	peerOnce.Do(func() {
		job := launch.NewJobName()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envPeer+"="+job)
		cmd.Stderr = os.Stderr
		// No Pdeathsig: it fires when the forking thread exits, and
		// benchmark goroutines lock (then end) their threads. The peer
		// leaves when its endpoint sees this process die.
		if peerErr = cmd.Start(); peerErr != nil {
			return
		}
		peerProc = cmd.Process
		peer, peerErr = newSide(job, 0)
	})
	return peer, peerErr
}

// BenchmarkLMT measures each backend streaming and in ping-pong at 64 KiB to
// 16 MiB, each Go figure next to the C reference of the same mechanism
// (compare the GB/s metrics of the go and raw lines of one run).
func BenchmarkLMT(b *testing.B) {
	for _, shape := range []string{"stream", "pingpong"} {
		for _, backend := range []string{"shm", "cma", "cma-write", "cma-split", "vmsplice", "pipe"} {
			for _, size := range benchSizes() {
				name := fmt.Sprintf("%s/%s/%s", shape, backend, sizeName(size))
				b.Run(name+"/go", func(b *testing.B) { benchGo(b, shape, backend, size) })
				b.Run(name+"/raw", func(b *testing.B) { benchRaw(b, shape, backend, size) })
			}
		}
	}
}

func benchGo(b *testing.B, shape, backend string, size int) {
	pin(0)
	s, err := startPeer()
	if err != nil {
		b.Fatal(err)
	}
	s.buffers(size)
	if err := s.ep.Send(1, tagCmd, fmt.Appendf(nil, "%s %s %d %d", shape, backend, size, b.N)); err != nil {
		b.Fatal(err)
	}
	ack := make([]byte, 16)
	if st, err := s.ep.Recv(1, tagCmd, ack); err != nil || string(ack[:st.Count]) != "ready" {
		b.Fatalf("peer answered %q, %v", ack, err)
	}
	b.SetBytes(int64(size))
	runtime.GC()
	b.ResetTimer()
	start := time.Now()
	if shape == "stream" {
		err = s.stream(1, true, backend, b.N)
	} else {
		err = s.pingpong(1, true, backend, b.N)
	}
	if err != nil {
		b.Fatal(err)
	}
	if st, err := s.ep.Recv(1, tagCmd, ack); err != nil || string(ack[:st.Count]) != "done" {
		b.Fatalf("peer answered %q, %v", ack, err)
	}
	el := time.Since(start).Seconds()
	bytes := float64(size) * float64(b.N)
	if shape == "pingpong" {
		bytes *= 2
	}
	b.ReportMetric(bytes/el/1e9, "GB/s")
	if st, ok := attach.Stats(&s.reqs[0]); !ok || st.Backend != backend {
		b.Fatalf("last message went via %+v, want %s", st, backend)
	}
}

func benchRaw(b *testing.B, shape, backend string, size int) {
	// A blocked endpoint polls (spin, then sched_yield), as MPI ranks do:
	// on two CPUs the idle Go peer would take turns with the C processes.
	// Stopped, it leaves them the machine the Go pair had.
	if peerProc != nil {
		if err := peerProc.Signal(unix.SIGSTOP); err != nil {
			b.Fatal(err)
		}
		defer peerProc.Signal(unix.SIGCONT)
	}
	// Nor may a collection of the Go side's garbage run beside them.
	runtime.GC()
	// The C reference copies a CMA message in one call, as the baselines
	// measure CMA: chunks, which keep small messages flowing beside a
	// large one, are a cost of the Go side's to bear.
	gbps, err := rawbench.Run(rawbench.Params{Mech: raw[backend], PingPong: shape == "pingpong", Size: size, Iters: b.N,
		Chunk: size, Slots: lmt.DefaultShmSlots, SlotSize: lmt.DefaultShmSlotSize, PipeSize: fifo.DefaultSize})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportMetric(gbps, "GB/s")
}

// TestReference checks that the C reference builds and moves data for
// every mechanism (raw.c checks every receive buffer, guard byte included,
// and fails otherwise), so that a broken reference fails CI, not only
// benchmarks.
func TestReference(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("lacks gcc: gcc not installed: cannot build the C reference")
	}
	for _, m := range []string{"pipe", "vmsplice", "cma", "cma-write", "cma-split", "cma-split-preset", "shm"} {
		for _, pp := range []bool{false, true} {
			g, err := rawbench.Run(rawbench.Params{Mech: m, PingPong: pp, Size: 100003, Iters: 3,
				Chunk: 65536, Slots: 8, SlotSize: 32768, PipeSize: 1 << 20})
			if err != nil || g <= 0 {
				t.Errorf("%s pingpong=%v: %v GB/s, %v", m, pp, g, err)
			}
		}
	}
	// A misspelt mechanism must not quietly measure the shm ring.
	_, err := rawbench.Run(rawbench.Params{Mech: "cma-splt", Size: 4096, Iters: 1, Chunk: 65536, Slots: 8, SlotSize: 32768, PipeSize: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "unknown mechanism cma-splt") {
		t.Errorf("mechanism cma-splt: %v, want the reference to refuse it by name", err)
	}
}
