package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/pages"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/copyprobe"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/pagebuf"
)

// EnvSpec carries the JSON Spec to the ranks.
const EnvSpec = "LMTBENCH_SPEC"

// maxIters bounds calibration, so that a broken clock cannot loop forever.
const maxIters = 1 << 22

// Worker is the body of a rank. Rank 0 writes one JSON Sample per line to
// out; errors go to errOut as one line. It returns the exit status.
func Worker(p launch.Proc, out, errOut io.Writer) int {
	err := worker(p, out)
	var u *engine.Unavailable
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u):
		// The parent turns this back into the *engine.Unavailable, so
		// that a sweep can skip the backend with its reason and fix.
		js, _ := json.Marshal(u)
		fmt.Fprintf(errOut, "%s%s\n", unavailablePrefix, js)
		return exitUnavailable
	}
	fmt.Fprintf(errOut, "rank %d: %v\n", p.Rank, err)
	return 1
}

// A rank that finds its backend unusable with its peer exits with this
// status and one unavailablePrefix line on stderr.
const (
	exitUnavailable   = 3
	unavailablePrefix = "unavailable: "
)

func worker(p launch.Proc, out io.Writer) error {
	var spec Spec
	if err := json.Unmarshal([]byte(os.Getenv(EnvSpec)), &spec); err != nil {
		return fmt.Errorf("reading %s: %w", EnvSpec, err)
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	if spec.CPUs != nil {
		if err := machine.PinProcess(spec.CPUs[p.Rank]); err != nil {
			return err
		}
	}
	// The timed loops read this thread's CPU time, so they must stay on it.
	runtime.LockOSThread()
	if spec.Mode == Placement {
		return placementWorker(spec, p.Rank, out)
	}
	if spec.Mode == Alltoall {
		return alltoallWorker(p, spec, out)
	}
	if p.Size != 2 {
		return fmt.Errorf("%s runs between 2 processes, job has %d", spec.Mode, p.Size)
	}
	b, err := engine.Lookup(spec.Backend)
	if err != nil {
		return err
	}
	// The shared memory's *os.File must stay reachable until the end: its
	// finalizer closes fd 5, and the garbage collection that newRank's
	// buffers bring about used to run it between the engine's Open, which
	// kept no reference, and the probe's mmap of the same fd.
	shared := os.NewFile(fdShared, "shared")
	defer shared.Close()
	line, err := openLineProbe(spec, p.Rank)
	if err != nil {
		return err
	}
	defer line.close()
	maxSize := slices.Max(spec.Sizes)
	var alloc *allocator
	if spec.Pages != pagebuf.Heap {
		alloc = &allocator{kind: spec.Pages}
		defer alloc.free()
	}
	e, err := b.Open(engine.Peer{Proc: p, MaxSize: maxSize, CPUs: spec.CPUs, Shared: shared, Alloc: alloc.fn()})
	if err != nil {
		return err
	}
	defer e.Close()
	r, err := newRank(spec, e, openCtl(), p.Rank, alloc)
	if err != nil {
		return err
	}
	if p.Rank == 0 {
		return lead(spec, r, placer{path: spec.Probe, line: line, tell: r.tell}, json.NewEncoder(out))
	}
	return follow(r, line)
}

// allocator places a rank's buffers in spec.Pages pages, one mapping
// each, and keeps them to unmap when the job ends. A nil one is Go's heap.
type allocator struct {
	kind pagebuf.Kind
	bufs []*pagebuf.Buffer
}

func (a *allocator) alloc(n int) ([]byte, error) {
	var d pages.Decision
	if a.kind == pagebuf.Huge {
		d = pages.Plan(pages.Anon, int64(n))
	}
	b, err := pagebuf.Alloc(a.kind, n, d)
	if err != nil {
		pages.Release(d)
		return nil, err
	}
	a.bufs = append(a.bufs, b)
	return b.Mem, nil
}

// fn is alloc for engine.Peer, nil for the heap.
func (a *allocator) fn() func(int) ([]byte, error) {
	if a == nil {
		return nil
	}
	return a.alloc
}

// got is the mode of the first buffer allocated, "" for the heap.
func (a *allocator) got() string {
	if a == nil || len(a.bufs) == 0 {
		return ""
	}
	return a.bufs[0].Decision.Mode.String()
}

func (a *allocator) free() {
	for _, b := range a.bufs {
		b.Free()
	}
}

// newRank prepares rank me's buffers for the largest size of spec, in the
// pages of alloc (nil: Go's heap).
func newRank(spec Spec, e engine.Engine, c *ctl, me int, alloc *allocator) (*rank, error) {
	maxSize := slices.Max(spec.Sizes)
	r := &rank{spec: spec, e: e, ctl: c, me: me}
	var err error
	if r.send, err = e.SendBuffer(maxSize); err != nil {
		return nil, err
	}
	if rb, ok := e.(engine.RecvBufferer); ok {
		r.recv, err = rb.RecvBuffer(maxSize)
	} else if alloc != nil {
		r.recv, err = alloc.alloc(maxSize)
	} else {
		r.recv = make([]byte, maxSize)
	}
	if err != nil {
		return nil, err
	}
	// Touch every page now, so that no sample pays for first faults.
	for i := range r.send {
		r.send[i] = 1
	}
	for i := range r.recv {
		r.recv[i] = 2
	}
	if alloc != nil {
		// What the kernel gave, read once now that every page is
		// touched: each sample reports it, so a row says what it got.
		for _, b := range [][]byte{r.send, r.recv} {
			n, err := pagebuf.HugeBytes(b)
			if err != nil {
				return nil, err
			}
			r.hugeBytes += n
		}
		r.pages, r.bufferBytes = alloc.got(), int64(len(r.send)+len(r.recv))
	}
	return r, nil
}

type rank struct {
	spec        Spec
	e           engine.Engine
	ctl         *ctl
	me          int
	send, recv  []byte
	pollution   *PollutionSample // rank 0: what rank 1 reported for the last sample
	hugeBytes   int64            // of send and recv, mapped by huge pages (Spec.Pages set)
	pages       string           // what the first pagebuf buffer got
	bufferBytes int64            // len(send)+len(recv) when Spec.Pages is set, else 0
}

// The two-rank harness and the alltoall one drive their ranks the same
// way; these are the parts each provides.
type leader interface {
	tell(cmd, size, iters int64) error // send a command to every other rank
	verify(size int) error
	leadSample(size, iters int) (Sample, error)
}

type follower interface {
	command() (cmd, size, iters int64, err error)
	verify(size int) error
	loop(size, iters int) (time.Duration, error)
	reply(cpu time.Duration) error
}

// lead is rank 0: for each size it has the ranks verify a message, then
// calibrates the iteration count and takes the samples, each bracketed by
// the placement probe while the other ranks sleep on their pipes (or, the
// built-in probe, rank 1 takes part).
func lead(spec Spec, l leader, probe placer, enc encoder) error {
	for i, size := range spec.Sizes {
		if err := l.tell(cmdVerify, int64(size), 0); err != nil {
			return err
		}
		if err := l.verify(size); err != nil {
			return err
		}
		iters := spec.Iters
		if iters == 0 && spec.Mode != Pollution {
			// Calibrated after the warm-up's first iterations, not
			// before: auto's explorations and the channel's cold
			// first messages made calibration see it up to twice
			// as slow as it runs, and gave its samples half the
			// iterations of shm's at 4 MiB. Calibration's last run,
			// a quarter of a sample or more, is the rest of the
			// warm-up.
			if err := warmUp(l, spec.Mode, size, 0); err != nil {
				return err
			}
			var err error
			if iters, err = calibrate(spec, l, size); err != nil {
				return err
			}
		} else if err := warmUp(l, spec.Mode, size, iters); err != nil {
			return err
		}
		if i == 0 {
			if err := settle(spec, l, size, iters); err != nil {
				return err
			}
		}
		before, err := probe.measure()
		if err != nil {
			return err
		}
		for range spec.Samples {
			if rewarm := RewarmIterations(spec.Mode, iters); rewarm > 0 {
				if _, err := l.leadSample(size, rewarm); err != nil {
					return err
				}
			}
			s, err := l.leadSample(size, iters)
			if err != nil {
				return err
			}
			s.Before = before
			if s.After, err = probe.measure(); err != nil {
				return err
			}
			before = s.After
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
	}
	return l.tell(cmdDone, 0, 0)
}

// encoder takes each sample rank 0 measures: a *json.Encoder on the
// parent's pipe, or the caller's function in a job lmtbench did not start.
type encoder interface{ Encode(v any) error }

// warmUp runs WarmupIterations of a sample of iters, untimed.
func warmUp(l leader, mode string, size, iters int) error {
	if warm := WarmupIterations(mode, iters); warm > 0 {
		if _, err := l.leadSample(size, warm); err != nil {
			return err
		}
	}
	return nil
}

// settle runs untimed rounds of RewarmIterations at size, the job's
// first, until they have lasted spec.Warmup (DefaultWarmup); the sizes
// after it follow a job already settled.
func settle(spec Spec, l leader, size, iters int) error {
	round := RewarmIterations(spec.Mode, iters)
	var ran time.Duration
	for round > 0 && ran < spec.Warmup {
		s, err := l.leadSample(size, round)
		if err != nil {
			return err
		}
		if s.Seconds <= 0 {
			return nil // too fast to time: nothing to settle
		}
		ran += time.Duration(math.Round(s.Seconds * 1e9))
	}
	return nil
}

// follow is every other rank: it obeys rank 0 until told it is done. line
// is rank 1's side of the built-in probe (nil for other ranks and probes).
func follow(f follower, line *lineProbe) error {
	for {
		cmd, size, iters, err := f.command()
		if err != nil {
			return err
		}
		switch cmd {
		case cmdDone:
			return nil
		case cmdVerify:
			err = f.verify(int(size))
		case cmdProbe:
			if line != nil {
				line.measure()
			}
		case cmdSample:
			var cpu time.Duration
			if cpu, err = f.loop(int(size), int(iters)); err == nil {
				err = f.reply(cpu)
			}
		default:
			err = fmt.Errorf("unknown command %d from rank 0", cmd)
		}
		if err != nil {
			return err
		}
	}
}

// calibrate finds the iteration count that makes a sample last about
// SampleTime, growing the count eightfold until a run is long enough to
// time.
func calibrate(spec Spec, l leader, size int) (int, error) {
	target := spec.SampleTime.Seconds()
	for n := 1; ; n *= 8 {
		s, err := l.leadSample(size, n)
		if err != nil {
			return 0, err
		}
		if s.Seconds >= target/4 || n >= maxIters {
			iters := int(float64(n) * target / max(s.Seconds, 1e-9))
			return min(max(iters, 1), maxIters), nil
		}
	}
}

func (r *rank) tell(cmd, size, iters int64) error            { return r.ctl.put(cmd, size, iters) }
func (r *rank) command() (cmd, size, iters int64, err error) { return r.ctl.get() }

// reply sends rank 0 this rank's CPU time and the rails of the last
// message it received: two records, the second for the knem and ring
// rails.
func (r *rank) reply(cpu time.Duration) error {
	var rails [lmt.NumRails]int64
	if rr, ok := r.e.(engine.RailReporter); ok {
		rails = rr.Rails()
	}
	if err := r.ctl.put(int64(cpu), rails[lmt.ReadRail], rails[lmt.WriteRail]); err != nil {
		return err
	}
	return r.ctl.put(rails[lmt.KnemRail], rails[lmt.RingRail], r.hugeBytes)
}

// leadSample runs one timed sample from rank 0.
func (r *rank) leadSample(size, iters int) (Sample, error) {
	if err := r.ctl.put(cmdSample, int64(size), int64(iters)); err != nil {
		return Sample{}, err
	}
	start := time.Now()
	cpu, err := r.loop(size, iters)
	elapsed := time.Since(start)
	if err != nil {
		return Sample{}, err
	}
	peerCPU, read, write, err := r.ctl.get()
	if err != nil {
		return Sample{}, err
	}
	knem, ring, peerHuge, err := r.ctl.get()
	if err != nil {
		return Sample{}, err
	}
	return Sample{
		Rails:       [lmt.NumRails]int64{lmt.ReadRail: read, lmt.WriteRail: write, lmt.KnemRail: knem, lmt.RingRail: ring},
		Pollution:   r.pollution,
		Size:        size,
		Iterations:  iters,
		Messages:    iters * MessagesPerIteration(r.spec.Mode),
		Seconds:     elapsed.Seconds(),
		CPUSeconds:  [2]float64{cpu.Seconds(), time.Duration(peerCPU).Seconds()},
		Pages:       r.pages,
		HugeBytes:   [2]int64{r.hugeBytes, peerHuge},
		BufferBytes: r.bufferBytes,
	}, nil
}

// loop is the timed part, run by both ranks; it returns this thread's CPU
// time. NetPIPE receives into the send buffer, which engines may have
// placed in special memory (SendBuffer), and sends it straight back. For stream, rank 1 acknowledges the last message on the control
// pipe, so rank 0's clock covers the delivery of every message.
func (r *rank) loop(size, iters int) (time.Duration, error) {
	s, d := r.send[:size], r.recv[:size]
	e := r.e
	start := threadCPU()
	var err error
	switch {
	case r.spec.Mode == Pollution && r.me == 0:
		for i := 0; i < iters && err == nil; i++ {
			err = e.Send(s)
		}
		if err == nil {
			r.pollution, err = r.recvPollution(iters)
		}
	case r.spec.Mode == Pollution:
		err = r.measurePollution(d, iters)
	case r.spec.Mode == Bidir:
		for i := 0; i < iters && err == nil; i++ {
			err = e.SendRecv(s, d)
		}
	case r.spec.Mode == Stream && r.me == 0:
		for i := 0; i < iters && err == nil; i++ {
			err = e.Send(s)
		}
		if err == nil {
			_, _, _, err = r.ctl.get()
		}
	case r.spec.Mode == Stream:
		for i := 0; i < iters && err == nil; i++ {
			err = e.Recv(d)
		}
		if err == nil {
			err = r.ctl.put(1, 0, 0)
		}
	case r.spec.Mode == NetPIPE && r.me == 0:
		for i := 0; i < iters && err == nil; i++ {
			if err = e.Send(s); err == nil {
				err = e.Recv(s)
			}
		}
	case r.spec.Mode == NetPIPE:
		for i := 0; i < iters && err == nil; i++ {
			if err = e.Recv(s); err == nil {
				err = e.Send(s)
			}
		}
	case r.me == 0:
		for i := 0; i < iters && err == nil; i++ {
			if err = e.Send(s); err == nil {
				err = e.Recv(d)
			}
		}
	default:
		for i := 0; i < iters && err == nil; i++ {
			if err = e.Recv(d); err == nil {
				err = e.Send(s)
			}
		}
	}
	return threadCPU() - start, err
}

func threadCPU() time.Duration {
	var u unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// measurePollution is rank 1's side of a pollution sample: receive rounds
// messages, re-reading the working set around each, and report the medians
// to rank 0 on the control pipe.
func (r *rank) measurePollution(d []byte, rounds int) error {
	p, err := copyprobe.MeasurePollution(r.spec.WorkingSet, rounds, func() error { return r.e.Recv(d) })
	if err != nil {
		return err
	}
	missCode := int64(0)
	switch {
	case errors.Is(p.MissesErr, copyprobe.ErrNoCacheCounters):
		missCode = 1
	case p.MissesErr != nil:
		missCode = 2
	}
	if err := r.ctl.put(int64(p.Baseline), int64(p.AfterTransfer), missCode); err != nil {
		return err
	}
	return r.ctl.put(int64(p.BaselineMisses), int64(p.AfterMisses), 0)
}

func (r *rank) recvPollution(rounds int) (*PollutionSample, error) {
	base, after, missCode, err := r.ctl.get()
	if err != nil {
		return nil, err
	}
	bm, am, _, err := r.ctl.get()
	if err != nil {
		return nil, err
	}
	p := &PollutionSample{
		WorkingSet: r.spec.WorkingSet, Rounds: rounds, BaselineNs: base, AfterNs: after,
		Slowdown: float64(after) / float64(max(base, 1)),
	}
	switch missCode {
	case 0:
		p.BaselineMisses, p.AfterMisses = uint64(bm), uint64(am)
	case 1:
		p.MissesNote = "no hardware cache-miss counter here"
	default:
		p.MissesNote = "cache-miss counter failed"
	}
	return p, nil
}
