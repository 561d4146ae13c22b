// Package copyprobe counts, with eBPF, how many times a job's payload bytes
// are copied and by whom: user space, the kernel CPU, or a DMA engine. It
// measures per transfer what Buntinas, Goglin, Goodell, Mercier and
// Moreaud ("Cache-Efficient, Intranode, Large-Message MPI Communication
// with MPICH2-Nemesis", ICPP 2009, Table 2) state: two copies for the
// shared-memory double buffer and a pipe, one for vmsplice, CMA and KNEM,
// none on the CPU for KNEM with DMA offload.
//
//	p, err := copyprobe.Open(copyprobe.Options{})
//	...
//	defer p.Close()
//	p.TrackChildren(os.Getpid()) // the ranks this launcher starts next
//	// ... run the transfer of n bytes ...
//	r, _ := p.Read()
//	fmt.Println(r.CopiesPerByte(n)) // user 0.000, kernel 2.000, dma n/a
//
// # Copiers and modes
//
// Every [Report] names, per copier, the mode used and what it hooks; a
// copier that could not be attached carries the reason (capability
// missing, the kernel refused with an errno, module not loaded) and reads
// as NaN copies per byte, never as zero.
//
//   - User (ModeUprobe): a uprobe on memcopy.Copy, the one routine through
//     which knemesis copies payload in user space.
//   - Kernel, ModeFentry: fexit programs on the kernel's copy routines,
//     where the kernel has BTF and allows BPF trampolines.
//   - Kernel, ModeTracepoint: the syscalls' tracepoints and a model of what
//     each call copies (KernelAuto tries fentry first and says in
//     Status.Fallback why it fell back). Bytes no model covers are
//     reported as Unmodelled, not hidden.
//   - DMA (ModeModuleTracepoint): the knem module's knem_copy tracepoint;
//     without the module, [ErrModuleAbsent].
//
// Copies are counted for the processes [Probe.Track] and
// [Probe.TrackChildren] name, and their children; a launcher's own copies
// are not. [MeasurePollution] measures how much slower a receiver re-reads
// a cache-sized working set after each transfer.
//
// Requirements: root (or CAP_BPF with CAP_PERFMON), tracefs, kernel BTF
// for fentry and the descriptor classification; x86-64 syscall numbers.
// docs/design/copyprobe.md has the hooks, the syscall model and its limits.
package copyprobe
