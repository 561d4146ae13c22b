package copyprobe_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/tools/copyprobe"
)

func TestMain(m *testing.M) {
	if os.Getenv(envNoise) != "" {
		os.Exit(noiseMain())
	}
	code := m.Run()
	for _, p := range jobProbes.p {
		if p != nil {
			p.Close()
		}
	}
	os.Exit(code)
}

// jobProbes are the two probes, one per kernel mode, that measure every
// reference job. They are opened once per test binary, since opening one
// takes seconds in a TCG guest, follow the test process's children from
// then on (but not the test process, whose launcher reads the ranks'
// output) and are reset before each job.
var jobProbes struct {
	once sync.Once
	p    [2]*copyprobe.Probe
	err  error
}

func sharedProbes(t *testing.T) [2]*copyprobe.Probe {
	t.Helper()
	needRoot(t)
	jobProbes.once.Do(func() {
		for i, mode := range []copyprobe.KernelMode{copyprobe.KernelTracepoint, copyprobe.KernelFentry} {
			p, err := copyprobe.Open(copyprobe.Options{Kernel: mode})
			if err != nil {
				jobProbes.err = fmt.Errorf("Open(%v): %w", mode, err)
				return
			}
			jobProbes.p[i] = p
			if err := p.TrackChildren(os.Getpid()); err != nil {
				jobProbes.err = err
				return
			}
		}
	})
	if jobProbes.err != nil {
		t.Fatal(jobProbes.err)
	}
	for _, p := range jobProbes.p {
		if err := p.Reset(); err != nil {
			t.Fatal(err)
		}
	}
	return jobProbes.p
}

// needRoot skips where BPF cannot be loaded at all; CI runs as root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("lacks root: loading BPF programs takes CAP_BPF and CAP_PERFMON")
	}
}

// job describes a two-rank reference transfer.
type job struct {
	// files returns the descriptors each rank gets as fd 3, 4, ...; it
	// runs in the parent only.
	files func(t *testing.T) (rank0, rank1 []*os.File)
	rank  func(p launch.Proc) error
	// setup, when set, prepares each rank's command in the parent, before
	// files are appended to its ExtraFiles.
	setup func(rank int, cmd *exec.Cmd) error
	// during, when set, runs in the parent while the probes count, just
	// before the ranks start.
	during func(t *testing.T)
}

// measured is one job's counts under the two kernel modes. Fentry is nil
// when the kernel refused fentry, with the reason in FentryErr.
type measured struct {
	Tracepoint copyprobe.Report
	Fentry     *copyprobe.Report
	FentryErr  error
	// probes are the tracepoint and fentry mode probes (jobProbes).
	probes [2]*copyprobe.Probe
}

// run runs j as a launchtest job under the two jobProbes. In a rank it runs
// j.rank and returns ok == false: the caller must then return without
// checking.
//
// The ranks' stdout and stderr go to a regular file, not the launcher's
// pipe: their test output would otherwise count as pipe copies.
func run(t *testing.T, j job) (m measured, ok bool) {
	t.Helper()
	if _, child := launch.Self(); child {
		launchtest.Run(t, 2, j.rank)
		return m, false
	}
	m.probes = sharedProbes(t)
	tp, fe := m.probes[0], m.probes[1]
	var rank0, rank1 []*os.File
	if j.files != nil {
		rank0, rank1 = j.files(t)
	}
	log, err := os.CreateTemp(t.TempDir(), "ranks-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("ranks' output:\n%s", out)
		}
	})
	if j.during != nil {
		j.during(t)
	}
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: func(rank int, cmd *exec.Cmd) error {
		cmd.Stdout, cmd.Stderr = log, log
		if j.setup != nil {
			if err := j.setup(rank, cmd); err != nil {
				return err
			}
		}
		if rank == 0 {
			cmd.ExtraFiles = append(cmd.ExtraFiles, rank0...)
		} else {
			cmd.ExtraFiles = append(cmd.ExtraFiles, rank1...)
		}
		return nil
	}}, j.rank)

	if m.Tracepoint, err = tp.Read(); err != nil {
		t.Fatal(err)
	}
	r, err := fe.Read()
	if err != nil {
		t.Fatal(err)
	}
	if r.Kernel.Attached() {
		m.Fentry = &r
	} else {
		m.FentryErr = r.Kernel.Err
	}
	t.Logf("tracepoint mode:\n%v", m.Tracepoint)
	if m.Fentry != nil {
		t.Logf("fentry mode:\n%v", *m.Fentry)
	}
	return m, true
}

// expect is a copy count per transferred byte for each copier. dma is
// checked where the knem module is loaded (its tracepoint attached).
type expect struct{ user, kernel, dma float64 }

// within2 checks got copies per byte against want: within 2% of want, or
// for want == 0, under 2% of the payload.
func within2(got, want float64) bool {
	if want == 0 {
		return math.Abs(got) <= 0.02
	}
	return math.Abs(got-want) <= 0.02*want
}

// check asserts the counts of one report: the mode names, every CPU copier
// within 2%, and the DMA copier reported absent with its reason (no module)
// or within 2% of want.dma (module loaded).
func check(t *testing.T, r copyprobe.Report, kernelMode copyprobe.Mode, want expect) {
	t.Helper()
	if r.User.Mode != copyprobe.ModeUprobe || !r.User.Attached() {
		t.Errorf("user copier: %v, want mode %q", r.User, copyprobe.ModeUprobe)
	}
	if r.Kernel.Mode != kernelMode || !r.Kernel.Attached() {
		t.Errorf("kernel copier: %v, want mode %q", r.Kernel, kernelMode)
	}
	c := r.CopiesPerByte(transferSize)
	if !within2(c.User, want.user) {
		t.Errorf("user copies per byte = %.4f (%d bytes), want %.1f ±2%%", c.User, r.Bytes.User, want.user)
	}
	if !within2(c.Kernel, want.kernel) {
		t.Errorf("kernel copies per byte = %.4f (%d bytes), want %.1f ±2%%", c.Kernel, r.Bytes.Kernel, want.kernel)
	}
	checkDMA(t, r, want.dma)
}

func checkDMA(t *testing.T, r copyprobe.Report, want float64) {
	t.Helper()
	if r.DMA.Attached() {
		if c := r.CopiesPerByte(transferSize); !within2(c.DMA, want) {
			t.Errorf("DMA copies per byte = %.4f (%d bytes), want %.1f ±2%%", c.DMA, r.Bytes.DMA, want)
		}
		return
	}
	if want != 0 {
		t.Errorf("DMA copier not attached, want %.1f copies per byte: %v", want, r.DMA.Err)
	}
	if !errors.Is(r.DMA.Err, copyprobe.ErrModuleAbsent) {
		t.Errorf("DMA copier not attached for an unexpected reason: %v", r.DMA.Err)
	}
	if c := r.CopiesPerByte(transferSize); !math.IsNaN(c.DMA) {
		t.Errorf("DMA copies per byte = %v for an unattached probe, want NaN", c.DMA)
	}
}

// checkModes checks both kernel modes and that they agree with each other
// within 2% where both ran. The host refuses fentry; a guest kernel with
// BTF and a permissive BPF policy (the kci harness) runs it.
func checkModes(t *testing.T, m measured, want expect) {
	t.Run("tracepoint", func(t *testing.T) {
		check(t, m.Tracepoint, copyprobe.ModeTracepoint, want)
	})
	t.Run("fentry", func(t *testing.T) {
		if m.Fentry == nil {
			if inGuest {
				t.Fatalf("fentry refused in the KCI guest, which must allow it: %v", m.FentryErr)
			}
			t.Skipf("lacks fentry: kernel refused fentry, so only tracepoint mode ran: %v", m.FentryErr)
		}
		check(t, *m.Fentry, copyprobe.ModeFentry, want)
		tp, fe := m.Tracepoint.CopiesPerByte(transferSize), m.Fentry.CopiesPerByte(transferSize)
		if math.Abs(tp.Kernel-fe.Kernel) > 0.02*math.Max(tp.Kernel, 1) {
			t.Errorf("kernel copies per byte disagree: tracepoint %.4f, fentry %.4f", tp.Kernel, fe.Kernel)
		}
	})
}

func pipePair(size int) func(t *testing.T) ([]*os.File, []*os.File) {
	return func(t *testing.T) ([]*os.File, []*os.File) {
		r, w, err := newPipe(size)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return []*os.File{w}, []*os.File{r}
	}
}

func TestPipeIsTwoKernelCopies(t *testing.T) {
	m, ok := run(t, job{
		files: pipePair(1 << 20),
		rank: func(p launch.Proc) error {
			if p.Rank == 0 {
				return pipeWrite(extraFile(0), 1)
			}
			return pipeRead(extraFile(0), 1)
		},
	})
	if !ok {
		return
	}
	checkModes(t, m, expect{kernel: 2})
	if got := m.Tracepoint.Bytes.Kernel; got != 2*transferSize {
		t.Errorf("tracepoint model counted %d kernel bytes, want exactly 2 × %d", got, transferSize)
	}
}

func TestVmspliceReadvIsOneKernelCopy(t *testing.T) {
	m, ok := run(t, job{
		files: pipePair(1 << 20),
		rank: func(p launch.Proc) error {
			if p.Rank == 0 {
				return vmspliceSend(extraFile(0), 2)
			}
			return readvReceive(extraFile(0), 2)
		},
	})
	if !ok {
		return
	}
	checkModes(t, m, expect{kernel: 1})
	if got := m.Tracepoint.Bytes.Kernel; got != transferSize {
		t.Errorf("tracepoint model counted %d kernel bytes, want exactly %d", got, transferSize)
	}
}

func TestProcessVMReadvIsOneKernelCopy(t *testing.T) {
	m, ok := run(t, job{
		files: func(t *testing.T) ([]*os.File, []*os.File) {
			ctl0, ctl1 := pipePair(4096)(t)
			ack0, ack1 := pipePair(4096)(t)
			// rank 0 writes ctl and reads ack; rank 1 the reverse
			return []*os.File{ctl0[0], ack1[0]}, []*os.File{ctl1[0], ack0[0]}
		},
		rank: func(p launch.Proc) error {
			if p.Rank == 0 {
				return cmaExpose(extraFile(0), extraFile(1), 3)
			}
			return cmaRead(extraFile(0), extraFile(1), 3)
		},
	})
	if !ok {
		return
	}
	checkModes(t, m, expect{kernel: 1})
	if got := m.Tracepoint.Bytes.Kernel; got != transferSize+cmaControlBytes {
		t.Errorf("tracepoint model counted %d kernel bytes, want exactly %d + %d control bytes", got, transferSize, cmaControlBytes)
	}
}

func TestSharedDoubleBufferIsTwoUserCopies(t *testing.T) {
	m, ok := run(t, job{
		files: func(t *testing.T) ([]*os.File, []*os.File) {
			f, err := newShm()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return []*os.File{f}, []*os.File{f}
		},
		rank: func(p launch.Proc) error {
			if p.Rank == 0 {
				return shmSend(extraFile(0), 4)
			}
			return shmReceive(extraFile(0), 4)
		},
	})
	if !ok {
		return
	}
	checkModes(t, m, expect{user: 2})
	if got := m.Tracepoint.Bytes.User; got != 2*transferSize {
		t.Errorf("uprobe counted %d user bytes, want exactly 2 × %d", got, transferSize)
	}
}
