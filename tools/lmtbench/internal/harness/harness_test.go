package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/knemesis/knemesis/internal/pages"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/pagebuf"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/threshold"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

// chanEngine moves messages through Go channels, so that the harness's
// protocol and bookkeeping can be tested inside one process. corrupt >= 0
// flips that byte of every message it sends.
type chanEngine struct {
	out, in chan []byte
	corrupt int
	sent    *atomic.Int64 // messages sent by both ranks
}

func (c *chanEngine) SendBuffer(n int) ([]byte, error) { return make([]byte, n), nil }
func (c *chanEngine) Close() error                     { return nil }

func (c *chanEngine) Send(b []byte) error {
	m := bytes.Clone(b)
	if c.corrupt >= 0 && c.corrupt < len(m) {
		m[c.corrupt] ^= 0xff
	}
	c.sent.Add(1)
	c.out <- m
	return nil
}

func (c *chanEngine) Recv(b []byte) error {
	m := <-c.in
	if len(m) != len(b) {
		return errors.New("size mismatch")
	}
	copy(b, m)
	return nil
}

func (c *chanEngine) SendRecv(out, in []byte) error {
	if err := c.Send(out); err != nil {
		return err
	}
	return c.Recv(in)
}

// pair runs spec between two in-process ranks and returns rank 0's samples
// and both ranks' errors.
func pair(t *testing.T, spec Spec, corruptBy1 int) ([]Sample, error, error) {
	samples, err0, err1, _ := pairCounted(t, spec, corruptBy1)
	return samples, err0, err1
}

// pairCounted is pair that also returns how many messages the ranks sent.
func pairCounted(t *testing.T, spec Spec, corruptBy1 int) ([]Sample, error, error, int64) {
	t.Helper()
	sent := new(atomic.Int64)
	a, b := make(chan []byte, 1024), make(chan []byte, 1024)
	r01, w01, _ := os.Pipe()
	r10, w10, _ := os.Pipe()
	defer closeAll(r01, w01, r10, w10)
	var alloc0, alloc1 *allocator
	if spec.Pages != pagebuf.Heap {
		alloc0, alloc1 = &allocator{kind: spec.Pages}, &allocator{kind: spec.Pages}
		defer alloc0.free()
		defer alloc1.free()
	}
	r0, err := newRank(spec, &chanEngine{out: a, in: b, corrupt: -1, sent: sent}, newCtl(w01, r10), 0, alloc0)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := newRank(spec, &chanEngine{out: b, in: a, corrupt: corruptBy1, sent: sent}, newCtl(w10, r01), 1, alloc1)
	if err != nil {
		t.Fatal(err)
	}
	// The built-in probe runs on words in this process's memory, where
	// the job maps them from its shared memory.
	var line0, line1 *lineProbe
	if spec.Probe == machine.Builtin {
		words := new(lineWords)
		line0, line1 = &lineProbe{words: words, me: 0}, &lineProbe{words: words, me: 1}
	}
	done1 := make(chan error, 1)
	go func() { done1 <- follow(r1, line1) }()
	var out bytes.Buffer
	err0 := lead(spec, r0, placer{path: spec.Probe, line: line0, tell: r0.tell}, json.NewEncoder(&out))
	if err0 != nil {
		w01.Close() // unblocks rank 1's read of the next command
	}
	err1 := <-done1
	var samples []Sample
	dec := json.NewDecoder(&out)
	for dec.More() {
		var s Sample
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s)
	}
	return samples, err0, err1, sent.Load()
}

func TestSamplesPerSizeAndMessageCounts(t *testing.T) {
	for _, mode := range []string{PingPong, NetPIPE, Bidir, Stream} {
		spec := Spec{Mode: mode, Backend: "chan", Sizes: []int{1, 4096, 100000}, Iters: 7, Samples: 2}
		samples, err0, err1 := pair(t, spec, -1)
		if err0 != nil || err1 != nil {
			t.Fatalf("%s: rank errors %v, %v", mode, err0, err1)
		}
		if len(samples) != 6 {
			t.Fatalf("%s: %d samples, want 2 per size", mode, len(samples))
		}
		for i, s := range samples {
			if s.Size != spec.Sizes[i/2] || s.Iterations != 7 || s.Messages != 7*MessagesPerIteration(mode) || s.Seconds <= 0 {
				t.Errorf("%s sample %d: %+v", mode, i, s)
			}
			if s.Before.Class != "unknown" || s.After.Class != "unknown" {
				t.Errorf("%s sample %d: placement %v→%v without a probe; want unknown", mode, i, s.Before, s.After)
			}
		}
	}
}

// TestPagesReported: with Spec.Pages, each rank's receive buffer comes
// from pagebuf, and every sample carries what rank 0's got, each rank's
// huge bytes (read from smaps, so rank 1's travels on the control pipe)
// and the buffer bytes; without it, none of that.
func TestPagesReported(t *testing.T) {
	const size = 4 << 20
	want := pages.Decide(pages.ReadSystem(os.DirFS("/")), pages.Config{}, pages.Anon, size, 0).Mode
	for _, c := range []struct {
		kind  pagebuf.Kind
		pages string
	}{{pagebuf.Heap, ""}, {pagebuf.Small, "4KiB"}, {pagebuf.Huge, want.String()}} {
		t.Setenv(pages.EnvVar, "")
		spec := Spec{Mode: PingPong, Backend: "chan", Sizes: []int{size}, Iters: 2, Samples: 2, Pages: c.kind}
		samples, err0, err1 := pair(t, spec, -1)
		if err0 != nil || err1 != nil || len(samples) != 2 {
			t.Fatalf("%q: rank errors %v, %v; %d samples", c.kind, err0, err1, len(samples))
		}
		for _, s := range samples {
			buf := int64(0)
			if c.kind != pagebuf.Heap {
				buf = 2 * size // send (the engine's make) and receive
			}
			if s.Pages != c.pages || s.BufferBytes != buf {
				t.Fatalf("%q: sample has pages %q, %d buffer bytes; want %q, %d", c.kind, s.Pages, s.BufferBytes, c.pages, buf)
			}
			for rank, hb := range s.HugeBytes {
				// Only the receive buffer is pagebuf's: the send
				// buffer is chanEngine's heap slice, which
				// transparent_hugepage=always may back too.
				most := map[pagebuf.Kind]int64{pagebuf.Heap: 0, pagebuf.Small: size, pagebuf.Huge: 2 * size}[c.kind]
				if hb%(2<<20) != 0 || hb > most {
					t.Fatalf("%q: rank %d reports %d huge bytes of %d", c.kind, rank, hb, buf)
				}
			}
		}
	}
}

// TestWarmupPrecedesEverySize: before the samples of each size, untimed,
// the job moves its verification messages and WarmupIterations of the
// mode, and before each sample RewarmIterations; the samples report only
// their own.
func TestWarmupPrecedesEverySize(t *testing.T) {
	for _, mode := range []string{PingPong, NetPIPE, Bidir, Stream} {
		for _, iters := range []int{7, 100} {
			spec := Spec{Mode: mode, Backend: "chan", Sizes: []int{1, 4096}, Iters: iters, Samples: 2}
			samples, err0, err1, sent := pairCounted(t, spec, -1)
			if err0 != nil || err1 != nil {
				t.Fatalf("%s: rank errors %v, %v", mode, err0, err1)
			}
			warm := max(learnerRound, iters/4)
			if got := WarmupIterations(mode, iters); got != warm {
				t.Fatalf("WarmupIterations(%s, %d) = %d, want %d", mode, iters, got, warm)
			}
			rewarm := max(2, iters/4)
			if got := RewarmIterations(mode, iters); got != rewarm {
				t.Fatalf("RewarmIterations(%s, %d) = %d, want %d", mode, iters, got, rewarm)
			}
			perSize := VerifyMessages(mode) + (warm+2*(rewarm+iters))*MessagesPerIteration(mode)
			if sent != int64(2*perSize) {
				t.Errorf("%s, %d iterations: %d messages sent, want %d per size (verify %d, warm-up %d iterations, 2 samples of %d after %d re-warm)",
					mode, iters, sent, perSize, VerifyMessages(mode), warm, iters, rewarm)
			}
			for i, s := range samples {
				if s.Iterations != iters || s.Messages != iters*MessagesPerIteration(mode) {
					t.Errorf("%s sample %d: %+v; want %d iterations", mode, i, s, iters)
				}
			}
		}
	}
	if WarmupIterations(Pollution, 100) != 0 || WarmupIterations(Placement, 100) != 0 {
		t.Error("pollution and placement jobs are warmed up; want not")
	}
	if RewarmIterations(Pollution, 100) != 0 || RewarmIterations(Placement, 100) != 0 {
		t.Error("pollution and placement jobs are re-warmed; want not")
	}
}

// TestBuiltinProbeBracketsEverySample: with the built-in probe, rank 1 takes
// part in every reading (one before each size, one after each sample), and
// each reading is the line's time, in one class until the run files it.
func TestBuiltinProbeBracketsEverySample(t *testing.T) {
	spec := Spec{Mode: PingPong, Backend: "chan", Sizes: []int{1, 4096}, Iters: 7, Samples: 3, Probe: machine.Builtin}
	samples, err0, err1 := pair(t, spec, -1)
	if err0 != nil || err1 != nil {
		t.Fatalf("rank errors %v, %v", err0, err1)
	}
	if len(samples) != 6 {
		t.Fatalf("%d samples, want 3 per size", len(samples))
	}
	for i, s := range samples {
		for _, p := range []machine.Placement{s.Before, s.After} {
			// The class is the run's to give (machine.FindRegimes
			// over all its readings): one reading is all.
			if p.Class != machine.All || p.LatencyUs <= 0 {
				t.Errorf("sample %d: placement %+v, want %q with a positive time", i, p, machine.All)
			}
		}
		if i%3 > 0 && s.Before != samples[i-1].After {
			t.Errorf("sample %d: before %+v is not the previous sample's after %+v", i, s.Before, samples[i-1].After)
		}
	}
}

// scriptedLeader plays rank 0's side of a job whose messages take exactly
// perIter an iteration, except the job's first slow iterations (a cold
// channel, auto's first explorations), which take slowIter each. It records
// the iterations of every sample it is asked for, in order, so that
// calibration is tested by counts and order, not by a clock.
type scriptedLeader struct {
	perIter, slowIter time.Duration
	slow              int // first iterations of the job that are slow
	done              int // iterations run so far
	samples           []int
}

func (l *scriptedLeader) tell(cmd, size, iters int64) error { return nil }
func (l *scriptedLeader) verify(size int) error             { return nil }

func (l *scriptedLeader) leadSample(size, iters int) (Sample, error) {
	slow := min(iters, max(l.slow-l.done, 0))
	l.done += iters
	l.samples = append(l.samples, iters)
	d := time.Duration(iters-slow)*l.perIter + time.Duration(slow)*l.slowIter
	return Sample{Size: size, Iterations: iters, Messages: iters * MessagesPerIteration(PingPong), Seconds: d.Seconds()}, nil
}

// TestCalibrationFollowsWarmup: calibration runs after the warm-up's
// learnerRound iterations, so a job whose first ones take 2 ms each is
// calibrated on its warm 1 µs ones: eightfold runs of 1, 8 ... 32768
// iterations until one lasts a quarter of the 20 ms sample (32.768 ms),
// then 32768 × 20 / 32.768 = 20000 iterations a sample, re-warmed by a
// quarter of that. Calibrated on the slow iterations, the sample would
// have had 10.
func TestCalibrationFollowsWarmup(t *testing.T) {
	l := &scriptedLeader{perIter: time.Microsecond, slowIter: 2 * time.Millisecond, slow: WarmupIterations(PingPong, 0)}
	spec := Spec{Mode: PingPong, Backend: "chan", Sizes: []int{64}, SampleTime: 20 * time.Millisecond, Samples: 1}
	var out bytes.Buffer
	if err := lead(spec, l, placer{}, json.NewEncoder(&out)); err != nil {
		t.Fatal(err)
	}
	want := []int{learnerRound, 1, 8, 64, 512, 4096, 32768, 5000, 20000}
	if fmt.Sprint(l.samples) != fmt.Sprint(want) {
		t.Fatalf("samples of %v iterations, want %v (warm-up, calibration, re-warm, sample)", l.samples, want)
	}
	var s Sample
	if err := json.Unmarshal(out.Bytes(), &s); err != nil || s.Iterations != 20000 {
		t.Fatalf("reported sample %+v, %v; want 20000 iterations", s, err)
	}
}

// TestSettleWarmsTheFirstSize: a job runs its first size untimed, in
// rounds of RewarmIterations after the warm-up, until those rounds have
// lasted Spec.Warmup (1 ms of 25 µs rounds: 40), then re-warms and takes
// its sample; the second size, in a job already settled, does not.
func TestSettleWarmsTheFirstSize(t *testing.T) {
	l := &scriptedLeader{perIter: time.Microsecond}
	spec := Spec{Mode: PingPong, Backend: "chan", Sizes: []int{64, 128}, Iters: 100, Samples: 1, Warmup: time.Millisecond}
	if err := lead(spec, l, placer{}, json.NewEncoder(io.Discard)); err != nil {
		t.Fatal(err)
	}
	warm, rewarm := WarmupIterations(PingPong, 100), RewarmIterations(PingPong, 100)
	want := []int{warm}
	for range 40 {
		want = append(want, rewarm)
	}
	want = append(want, rewarm, 100, warm, rewarm, 100)
	if fmt.Sprint(l.samples) != fmt.Sprint(want) {
		t.Fatalf("runs of %v iterations, want %v (warm-up, 40 settling rounds, re-warm, sample; then the second size without settling)", l.samples, want)
	}
}

// TestWarmupSettlesAuto: the warm-up is one whole exploration round of
// auto's Learner where it weighs the most: every method auto weighs and a
// tuned table's own choice besides (pipe), at a size every one of them
// carries (16 KiB: the eager path and arena-copy too) and at 64 MiB. The
// samples then time auto settled, as an application runs it.
func TestWarmupSettlesAuto(t *testing.T) {
	tab := &threshold.Table{LMTMin: threshold.Threshold{Bytes: 4 << 10}, Rules: []threshold.Rule{{From: 4 << 10, Backend: threshold.Pipe}}}
	l, err := threshold.NewLearner(tab, auto.LearnedCandidates(), 64<<10-1, 4<<10-1)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{16 << 10, 64 << 20} {
		used := map[threshold.Backend]bool{}
		for range WarmupIterations(PingPong, 0) {
			b := l.Choose(size)
			used[b] = true
			l.Record(size, l.Index(b), time.Duration(size))
		}
		if st := l.State(size); !st.Settled || st.Rounds != 1 {
			t.Errorf("%d bytes: after %d warm-up iterations, by %d methods of %v: %+v; want one round over and settled",
				size, WarmupIterations(PingPong, 0), len(used), l.Candidates(), st)
		}
	}
	if len(l.Candidates()) != learnerRound/(1+threshold.LearnerSamples) {
		t.Errorf("the Learner weighs %v, the warm-up is sized for %d methods", l.Candidates(), learnerRound/(1+threshold.LearnerSamples))
	}
}

// TestCalibrationStopsAtMaxIters: a job too fast to time (every run 0 s)
// is calibrated to maxIters, not grown for ever.
func TestCalibrationStopsAtMaxIters(t *testing.T) {
	l := &scriptedLeader{}
	spec := Spec{Mode: PingPong, Backend: "chan", Sizes: []int{64}, SampleTime: 20 * time.Millisecond, Samples: 1}
	iters, err := calibrate(spec, l, 64)
	if err != nil || iters != maxIters {
		t.Fatalf("calibrate = %d, %v; want maxIters %d", iters, err, maxIters)
	}
	if last := l.samples[len(l.samples)-1]; last != 1<<24 || len(l.samples) != 9 {
		t.Errorf("runs of %v iterations, want eightfold from 1 to 1<<24", l.samples)
	}
}

// TestCalibratedSampleEndToEnd: the calibrated path between two real ranks
// yields one sample with its iterations, messages and a positive time;
// how many iterations depends on the machine's speed, so it is not
// asserted here (see TestCalibrationFollowsWarmup).
func TestCalibratedSampleEndToEnd(t *testing.T) {
	spec := Spec{Mode: PingPong, Backend: "chan", Sizes: []int{64}, SampleTime: 5 * time.Millisecond, Samples: 1}
	samples, err0, err1 := pair(t, spec, -1)
	if err0 != nil || err1 != nil || len(samples) != 1 {
		t.Fatalf("errors %v, %v; %d samples", err0, err1, len(samples))
	}
	if s := samples[0]; s.Iterations < 1 || s.Iterations > maxIters || s.Messages != s.Iterations*MessagesPerIteration(PingPong) || s.Seconds <= 0 {
		t.Errorf("calibrated sample %+v", s)
	}
}

func TestVerifyCatchesCorruption(t *testing.T) {
	spec := Spec{Mode: PingPong, Backend: "chan", Sizes: []int{4096}, Iters: 3, Samples: 1}
	samples, err0, _ := pair(t, spec, 17)
	want := "chan corrupted a 4096-byte message in a ping-pong: byte 17 is "
	if err0 == nil || !strings.Contains(err0.Error(), want) {
		t.Fatalf("rank 0 error %v; want it to contain %q", err0, want)
	}
	if len(samples) != 0 {
		t.Errorf("a corrupting engine still produced %d samples", len(samples))
	}
}
