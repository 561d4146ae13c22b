package copyprobe

import (
	"fmt"
	"math"
	"strings"
)

// Mode names how a copier's bytes were counted.
type Mode string

const (
	// ModeUprobe: a uprobe on memcopy.Copy reads each call's length.
	ModeUprobe Mode = "uprobe"
	// ModeFentry: fexit programs on the kernel's page copy routines
	// (copy_page_to_iter, copy_page_from_iter) add what they copied.
	ModeFentry Mode = "fentry"
	// ModeTracepoint: syscall tracepoints plus a per-call model of how many
	// times the kernel copies each transferred byte (see the package doc).
	ModeTracepoint Mode = "tracepoint"
	// ModeModuleTracepoint: the knem module's knem:knem_copy tracepoint.
	ModeModuleTracepoint Mode = "module-tracepoint"
)

// Status says how one copier is counted, or why it is not.
type Status struct {
	// Mode is the counting method in use; empty when nothing is attached.
	Mode Mode
	// Detail names what is hooked, e.g. the symbol and executable.
	Detail string
	// Fallback, when not empty, says why a preferred mode was not used,
	// e.g. "fentry refused by the kernel: operation not permitted".
	Fallback string
	// Err says why nothing counts this copier; its byte count is then
	// unknown, not zero.
	Err error
}

// Attached reports whether the copier is being counted.
func (s Status) Attached() bool { return s.Err == nil && s.Mode != "" }

func (s Status) String() string {
	if !s.Attached() {
		if s.Err == nil {
			return "not attached"
		}
		return "not attached: " + s.Err.Error()
	}
	out := string(s.Mode)
	if s.Detail != "" {
		out += " (" + s.Detail + ")"
	}
	if s.Fallback != "" {
		out += "; " + s.Fallback
	}
	return out
}

// Bytes counts the bytes copied by each copier since the last Reset. A byte
// copied twice by the kernel counts twice in Kernel.
type Bytes struct {
	User   uint64 // by memcopy.Copy in the job's processes
	Kernel uint64 // by the kernel CPU, including ModuleCPU
	DMA    uint64 // by a DMA engine on behalf of the job (knem module)

	// ModuleCPU is the part of Kernel copied by the knem module's CPU
	// paths (in the caller or on its kernel thread).
	ModuleCPU uint64
	// Unmodelled counts bytes that syscalls in the tracepoint model moved
	// through descriptors the model does not cover (regular files,
	// sockets, terminals); they are not in Kernel. Always zero in fentry
	// mode, where every page copy is counted whatever the descriptor.
	Unmodelled uint64
	// BadEngine counts knem_copy bytes whose engine is none of the three
	// the contract defines; nonzero means module and probe disagree.
	BadEngine uint64
}

// Report is what the probes counted, and how.
type Report struct {
	User   Status // ModeUprobe
	Kernel Status // ModeFentry or ModeTracepoint
	// DMA is ModeModuleTracepoint. The same tracepoint supplies
	// Bytes.ModuleCPU, so when it is absent, Kernel misses the module's
	// CPU copies too (and there are none: no module, no knem copies).
	DMA   Status
	Bytes Bytes
}

// Copies is a number of copies per transferred byte for each copier. A
// copier that was not counted is NaN, never 0.
type Copies struct {
	User, Kernel, DMA float64
}

// CopiesPerByte divides each copier's bytes by the payload bytes the
// transfer moved: 2.0 Kernel for a pipe (the writer's copy in, the reader's
// copy out), 1.0 for vmsplice or CMA, 2.0 User for a shared-memory double
// buffer, 1.0 DMA for an offloaded knem copy.
func (r Report) CopiesPerByte(transferred uint64) Copies {
	per := func(s Status, n uint64) float64 {
		if !s.Attached() || transferred == 0 {
			return math.NaN()
		}
		return float64(n) / float64(transferred)
	}
	return Copies{
		User:   per(r.User, r.Bytes.User),
		Kernel: per(r.Kernel, r.Bytes.Kernel),
		DMA:    per(r.DMA, r.Bytes.DMA),
	}
}

func (r Report) String() string {
	var b strings.Builder
	line := func(name string, s Status, n uint64) {
		if s.Attached() {
			fmt.Fprintf(&b, "%-6s %12d bytes  %s\n", name, n, s)
		} else {
			fmt.Fprintf(&b, "%-6s %12s        %s\n", name, "?", s)
		}
	}
	line("user", r.User, r.Bytes.User)
	line("kernel", r.Kernel, r.Bytes.Kernel)
	line("dma", r.DMA, r.Bytes.DMA)
	if r.Bytes.ModuleCPU > 0 {
		fmt.Fprintf(&b, "       %12d of the kernel bytes copied by the knem module's CPU paths\n", r.Bytes.ModuleCPU)
	}
	if r.Bytes.Unmodelled > 0 {
		fmt.Fprintf(&b, "       %12d bytes moved by syscalls on fds outside the model (not counted)\n", r.Bytes.Unmodelled)
	}
	if r.Bytes.BadEngine > 0 {
		fmt.Fprintf(&b, "       %12d bytes in knem_copy events with an unknown engine\n", r.Bytes.BadEngine)
	}
	return b.String()
}

// Format renders copies per byte the way lmtbench prints them: "n/a" for a
// copier that was not counted.
func (c Copies) String() string {
	f := func(v float64) string {
		if math.IsNaN(v) {
			return "n/a"
		}
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("user %s, kernel %s, dma %s", f(c.User), f(c.Kernel), f(c.DMA))
}
