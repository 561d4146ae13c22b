package copyprobe

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// KernelMode chooses how kernel CPU copies are counted.
type KernelMode int

const (
	// KernelAuto tries fentry and falls back to syscall tracepoints,
	// recording why in Status.Fallback.
	KernelAuto KernelMode = iota
	// KernelFentry insists on fentry: if the kernel refuses it, the kernel
	// copier is not counted and Status.Err says why.
	KernelFentry
	// KernelTracepoint uses the syscall tracepoints and model only.
	KernelTracepoint
)

func (m KernelMode) String() string {
	switch m {
	case KernelAuto:
		return "auto"
	case KernelFentry:
		return "fentry"
	case KernelTracepoint:
		return "tracepoint"
	}
	return fmt.Sprintf("KernelMode(%d)", int(m))
}

// Options configure Open. The zero value counts memcopy.Copy in the calling
// program's own executable and picks the kernel mode automatically.
type Options struct {
	// Executable is the program whose memcopy.Copy gets the uprobe: the
	// binary the job's processes run. os.Executable() when empty.
	Executable string
	Kernel     KernelMode
}

// Values of the job_tgids map; see copyprobe.bpf.c.
const (
	trackCount    uint32 = 1
	trackChildren uint32 = 2
)

// Counter slots, in the order of enum counter in copyprobe.bpf.c.
const (
	slotUser uint32 = iota
	slotKernel
	slotModuleCPU
	slotDMA
	slotUnmodelled
	slotBadEngine
	slotCount
)

// Probe counts the copies made by the processes it tracks. It is not safe
// for concurrent use.
type Probe struct {
	spec     *ebpf.CollectionSpec
	counters *ebpf.Map
	jobs     *ebpf.Map
	inflight *ebpf.Map
	tracefs  string
	progs    []*ebpf.Program
	links    []link.Link

	user, kernel, dma Status
}

// Open loads the probes and attaches every copier it can. A copier that
// cannot be attached is recorded in the Report with the reason; Open fails
// only when no probe can work at all (no BPF permission, no tracefs).
//
// Nothing is counted until Track or TrackChildren names the job.
func Open(o Options) (_ *Probe, err error) {
	if o.Kernel < KernelAuto || o.Kernel > KernelTracepoint {
		return nil, fmt.Errorf("copyprobe: unknown kernel mode %d", int(o.Kernel))
	}
	spec, err := loadCopyprobe()
	if err != nil {
		return nil, fmt.Errorf("copyprobe: reading the embedded BPF object: %w", err)
	}
	p := &Probe{spec: spec}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	var m copyprobeMaps
	if err := spec.LoadAndAssign(&m, nil); err != nil {
		return nil, fmt.Errorf("copyprobe: creating BPF maps: %w (needs root, or CAP_BPF and CAP_PERFMON)", err)
	}
	p.counters, p.jobs, p.inflight = m.Counters, m.JobTgids, m.Inflight
	if p.tracefs, err = ensureTracefs(); err != nil {
		return nil, fmt.Errorf("copyprobe: %w", err)
	}
	if err := p.attachFollow(); err != nil {
		return nil, fmt.Errorf("copyprobe: following the job's forks: %w", err)
	}
	p.user = p.attachUser(o.Executable)
	p.kernel = p.attachKernel(o.Kernel)
	p.dma = p.attachModule()
	return p, nil
}

// Close detaches every probe and frees the maps.
func (p *Probe) Close() error {
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	for _, prog := range p.progs {
		errs = append(errs, prog.Close())
	}
	for _, m := range []*ebpf.Map{p.counters, p.jobs, p.inflight} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	p.links, p.progs = nil, nil
	p.counters, p.jobs, p.inflight = nil, nil, nil
	return errors.Join(errs...)
}

// Track counts the copies of process pid and of every process it, or its
// tracked children, fork from now on.
func (p *Probe) Track(pid int) error { return p.track(pid, trackCount) }

// TrackChildren counts the copies of every process pid forks from now on,
// and their children, but not pid's own: a launcher calls it on itself so
// that its own bookkeeping (reading the ranks' output) is left out.
func (p *Probe) TrackChildren(pid int) error { return p.track(pid, trackChildren) }

func (p *Probe) track(pid int, how uint32) error {
	if pid <= 0 {
		return fmt.Errorf("copyprobe: pid %d is not a process id", pid)
	}
	if err := unix.Kill(pid, 0); errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("copyprobe: process %d does not exist", pid)
	}
	if err := p.jobs.Put(uint32(pid), how); err != nil {
		return fmt.Errorf("copyprobe: tracking process %d: %w", pid, err)
	}
	return nil
}

// Untrack stops counting pid's copies and following its forks; the
// children it already forked stay tracked.
func (p *Probe) Untrack(pid int) error {
	if err := p.jobs.Delete(uint32(pid)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("copyprobe: untracking process %d: %w", pid, err)
	}
	return nil
}

// Reset zeroes the byte counts.
func (p *Probe) Reset() error {
	zero := make([]uint64, ebpf.MustPossibleCPU())
	for slot := uint32(0); slot < slotCount; slot++ {
		if err := p.counters.Put(slot, zero); err != nil {
			return fmt.Errorf("copyprobe: resetting counter %d: %w", slot, err)
		}
	}
	return nil
}

// Read returns the bytes counted since Open or the last Reset, and how
// each copier was counted.
func (p *Probe) Read() (Report, error) {
	var sums [slotCount]uint64
	var perCPU []uint64
	for slot := range sums {
		if err := p.counters.Lookup(uint32(slot), &perCPU); err != nil {
			return Report{}, fmt.Errorf("copyprobe: reading counter %d: %w", slot, err)
		}
		for _, v := range perCPU {
			sums[slot] += v
		}
	}
	r := Report{User: p.user, Kernel: p.kernel, DMA: p.dma}
	r.Bytes = Bytes{
		User:       sums[slotUser],
		Kernel:     sums[slotKernel] + sums[slotModuleCPU],
		DMA:        sums[slotDMA],
		ModuleCPU:  sums[slotModuleCPU],
		Unmodelled: sums[slotUnmodelled],
		BadEngine:  sums[slotBadEngine],
	}
	return r, nil
}

// Status returns how each copier is counted, as Read would report it.
func (p *Probe) Status() (user, kernel, dma Status) { return p.user, p.kernel, p.dma }

// executable returns the path the uprobe goes on.
func executable(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this program's executable: %w", err)
	}
	return exe, nil
}
