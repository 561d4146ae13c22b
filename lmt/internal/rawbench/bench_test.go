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

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/internal/rawbench"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	_ "github.com/knemesis/knemesis/pipe"
	_ "github.com/knemesis/knemesis/vmsplice"
	"golang.org/x/sys/unix"
)

// The Go side of each benchmark runs between this process (rank 0, CPU 0)
// and a peer process (rank 1, CPU 1) started from the same test binary:
// init sees envPeer and serves commands instead of running tests.
const envPeer = "KNEMESIS_LMT_BENCH_PEER"

// window is how many messages the streaming sender keeps in flight.
const window = 2

var sizes = []int{64 << 10, 1 << 20, 4 << 20, 16 << 20}

// mechanism of each backend in the C reference (cma-write is held against
// process_vm_readv, the same copy in the other direction).
var raw = map[string]string{"shm": "shm", "cma": "cma", "cma-write": "cma", "pipe": "pipe", "vmsplice": "vmsplice"}

func init() {
	if os.Getenv(envPeer) != "" {
		os.Exit(servePeer())
	}
}

func pin(cpu int) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu % runtime.NumCPU())
	_ = unix.SchedSetaffinity(0, &set)
}

type side struct {
	ch   *lmttest.Channel
	eng  *lmt.Engine
	bufs [window][]byte
	recv [window][]byte
	rts  []byte
}

func newSide(p launch.Proc, fds []int) (*side, error) {
	ch, err := lmttest.NewChannel(p, fds)
	if err != nil {
		return nil, err
	}
	cfg := ch.Config(p)
	eng, err := lmt.New(cfg)
	if err != nil {
		return nil, err
	}
	ch.Engine = eng
	return &side{ch: ch, eng: eng, rts: make([]byte, 4096)}, nil
}

func (s *side) buffers(size int) {
	for i := range s.bufs {
		if len(s.bufs[i]) != size {
			s.bufs[i] = make([]byte, size)
			s.recv[i] = make([]byte, size)
			for j := range s.bufs[i] {
				s.bufs[i][j] = byte(j)
			}
		}
	}
}

func (s *side) send(peer int, buf []byte, backend string) (*lmt.Transfer, error) {
	t, n, err := s.eng.StartSend(peer, [][]byte{buf}, backend, s.rts)
	if err != nil {
		return nil, err
	}
	return t, s.ch.SendRTS(peer, s.rts[:n])
}

func (s *side) startRecv(peer int, buf []byte) (*lmt.Transfer, error) {
	r, err := s.ch.NextRTS(peer)
	if err != nil {
		return nil, err
	}
	return s.eng.StartRecv(peer, r, [][]byte{buf})
}

// stream sends (or receives) n messages with window in flight.
func (s *side) stream(peer int, sender bool, backend string, n int) error {
	var inflight [window]*lmt.Transfer
	for i := 0; i < n; i++ {
		k := i % window
		if t := inflight[k]; t != nil {
			if err := s.ch.Wait(t); err != nil {
				return err
			}
		}
		var err error
		if sender {
			inflight[k], err = s.send(peer, s.bufs[k], backend)
		} else {
			inflight[k], err = s.startRecv(peer, s.recv[k])
		}
		if err != nil {
			return err
		}
	}
	for _, t := range inflight {
		if t != nil {
			if err := s.ch.Wait(t); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *side) pingpong(peer int, first bool, backend string, n int) error {
	for i := 0; i < n; i++ {
		for turn := 0; turn < 2; turn++ {
			var t *lmt.Transfer
			var err error
			if (turn == 0) == first {
				t, err = s.send(peer, s.bufs[0], backend)
			} else {
				t, err = s.startRecv(peer, s.recv[0])
			}
			if err == nil {
				err = s.ch.Wait(t)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func servePeer() int {
	pin(1)
	s, err := newSide(launch.Proc{Rank: 1, Size: 2, Job: os.Getenv(envPeer)}, []int{3, -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench peer:", err)
		return 1
	}
	defer s.eng.Close()
	for {
		m, err := s.ch.NextMsg(0)
		if err != nil {
			return 0 // the benchmark process is gone
		}
		f := strings.Fields(string(m))
		if len(f) != 4 {
			return 0
		}
		size, _ := strconv.Atoi(f[2])
		n, _ := strconv.Atoi(f[3])
		s.buffers(size)
		if err := s.ch.SendMsg(0, []byte("ready")); err != nil {
			return 1
		}
		if f[0] == "stream" {
			err = s.stream(0, false, f[1], n)
		} else {
			err = s.pingpong(0, false, f[1], n)
		}
		if err == nil {
			err = s.ch.SendMsg(0, []byte("done"))
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
)

func startPeer() (*side, error) {
	peerOnce.Do(func() {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			peerErr = err
			return
		}
		job := launch.NewJobName()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envPeer+"="+job)
		cmd.ExtraFiles = []*os.File{os.NewFile(uintptr(fds[1]), "bench-peer")}
		cmd.Stderr = os.Stderr
		if peerErr = cmd.Start(); peerErr != nil {
			return
		}
		unix.Close(fds[1])
		peer, peerErr = newSide(launch.Proc{Rank: 0, Size: 2, Job: job}, []int{-1, fds[0]})
	})
	return peer, peerErr
}

// BenchmarkLMT measures each backend streaming and in ping-pong at 64 KiB to
// 16 MiB, each Go figure next to the C reference of the same mechanism
// (compare the GB/s metrics of the go and raw lines of one run).
func BenchmarkLMT(b *testing.B) {
	for _, shape := range []string{"stream", "pingpong"} {
		for _, backend := range []string{"shm", "cma", "cma-write", "vmsplice", "pipe"} {
			for _, size := range sizes {
				name := fmt.Sprintf("%s/%s/%dKiB", shape, backend, size>>10)
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
	if err := s.ch.SendMsg(1, fmt.Appendf(nil, "%s %s %d %d", shape, backend, size, b.N)); err != nil {
		b.Fatal(err)
	}
	if m, err := s.ch.NextMsg(1); err != nil || string(m) != "ready" {
		b.Fatalf("peer answered %q, %v", m, err)
	}
	b.SetBytes(int64(size))
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
	if m, err := s.ch.NextMsg(1); err != nil || string(m) != "done" {
		b.Fatalf("peer answered %q, %v", m, err)
	}
	el := time.Since(start).Seconds()
	bytes := float64(size) * float64(b.N)
	if shape == "pingpong" {
		bytes *= 2
	}
	b.ReportMetric(bytes/el/1e9, "GB/s")
}

func benchRaw(b *testing.B, shape, backend string, size int) {
	gbps, err := rawbench.Run(rawbench.Params{Mech: raw[backend], PingPong: shape == "pingpong", Size: size, Iters: b.N,
		Chunk: lmt.DefaultChunk, Slots: lmt.DefaultShmSlots, SlotSize: lmt.DefaultShmSlotSize, PipeSize: lmt.DefaultPipeSize})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(size))
	b.ReportMetric(gbps, "GB/s")
}

// TestReference checks that the C reference builds and moves data for
// every mechanism, so that a broken reference fails CI, not only benchmarks.
func TestReference(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed: cannot build the C reference")
	}
	for _, m := range []string{"pipe", "vmsplice", "cma", "shm"} {
		for _, pp := range []bool{false, true} {
			g, err := rawbench.Run(rawbench.Params{Mech: m, PingPong: pp, Size: 100003, Iters: 3,
				Chunk: 65536, Slots: 8, SlotSize: 32768, PipeSize: 1 << 20})
			if err != nil || g <= 0 {
				t.Errorf("%s pingpong=%v: %v GB/s, %v", m, pp, g, err)
			}
		}
	}
}
