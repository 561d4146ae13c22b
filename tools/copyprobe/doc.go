// Package copyprobe counts, with eBPF, how many times a job's payload bytes
// are copied and by whom: user space, the kernel CPU, or a DMA engine.
//
// The case for kernel-assisted large-message transfer (Buntinas, Goglin,
// Goodell, Mercier and Moreaud, "Cache-Efficient, Intranode, Large-Message
// MPI Communication with MPICH2-Nemesis", ICPP 2009, §4 and Table 2) is
// that the shared-memory double buffer and a pipe copy every byte twice,
// vmsplice, CMA (process_vm_readv) and KNEM once, and KNEM with DMA
// offload not at all on the CPU. copyprobe measures this per transfer
// instead of taking it on faith:
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
// Every Report names, per copier, the mode used and what it hooks; a copier
// that could not be attached carries the reason (capability missing, the
// kernel refused with an errno, module not loaded) and reads as NaN copies
// per byte, never as zero.
//
//   - User (ModeUprobe): a uprobe on memcopy.Copy, the one routine through
//     which knemesis copies payload in user space, in the job's executable
//     (Options.Executable). The program reads len(dst) and len(src) from
//     the Go register ABI (amd64: BX and SI) and adds the smaller. The
//     probe sits just past the function's stack-growth check, not on its
//     entry: a call whose stack must grow runs the entry twice (morestack
//     jumps back to it) and would be counted twice. A uretprobe is not
//     used: it rewrites the return address on the stack, which breaks when
//     Go moves a goroutine's stack. The function is found through
//     .gopclntab, so binaries linked with -s (go test, go run) work.
//
//   - Kernel, ModeFentry: fexit programs add the bytes that kernel
//     functions report having copied. Preferred are the page copy routines,
//     copy_page_to_iter and copy_page_from_iter, through which pipe_read
//     (vmspliced pages included), pipe_write and process_vm_readv/writev
//     copy; the iov_iter helpers they call are not hooked, which would
//     count the same bytes twice. Kernels that build lib/iov_iter.c without
//     ftrace (Debian 6.1 and 6.12: attaching fails with EBUSY) get the
//     functions that make each path's one copy instead: the pipe read and
//     write methods (pipe_read/pipe_write, anon_pipe_read/anon_pipe_write
//     since 6.18), pipe_to_user (vmsplice out of a pipe) and process_vm_rw;
//     where process_vm_rw cannot be traced (before 6.6 a trampoline takes 6
//     arguments, it has 7), CMA is counted by the syscall model and
//     Status.Detail says so. Page copies made inside an ioctl on /dev/knem
//     (knem's CPU engine copies to an unpinned user buffer with
//     copy_page_to_iter) are left to the module's tracepoint, so that they
//     are not counted twice; ioctl entry and exit tracepoints mark those
//     calls. Needs kernel BTF (/sys/kernel/btf/vmlinux; Debian kernels have
//     it) and a kernel that allows BPF trampolines. This project's host
//     refuses them with EPERM, hence:
//
//   - Kernel, ModeTracepoint: the syscalls' entry and exit tracepoints and a
//     model of what each call copies, applied to the byte count it returns.
//     KernelAuto (the default) tries fentry first and records why it fell
//     back in Status.Fallback.
//
//   - DMA (ModeModuleTracepoint): the knem module's knem:knem_copy
//     tracepoint (fields u64 length, u32 engine, s32 pid). Engine 0 (CPU
//     copy in the caller) and 1 (CPU copy on the module's kernel thread)
//     add to Kernel and to Bytes.ModuleCPU, engine 2 (DMA) to DMA. The
//     field offsets are read from the event's format file when the probe
//     attaches, and the job filter uses the event's pid, not the current
//     task, because a kernel thread or a DMA completion copies on a
//     process's behalf. Without the module, the DMA copier reports
//     ErrModuleAbsent. The module's CPU copies are counted this way in both
//     kernel modes: its kmap+memcpy copies go through no hooked function.
//
// # The syscall model
//
// In tracepoint mode, for each call made by a tracked process, the entry
// program classifies its descriptors (a pipe or FIFO end, read or write
// side, found through the task's file table with CO-RE field offsets) and
// the exit program charges the returned byte count:
//
//	read, readv on a pipe          1 copy   (pipe_read; also of vmspliced pages)
//	write, writev into a pipe      1 copy   (pipe_write copies into pipe pages)
//	vmsplice into a pipe           0 copies (the pipe references the user pages)
//	vmsplice out of a pipe         1 copy   (vmsplice_to_user copies)
//	splice pipe to pipe            0 copies (buffers move by reference)
//	process_vm_readv, _writev      1 copy
//	ioctl on /dev/knem             0 here  (knem:knem_copy counts its copies)
//	the same calls on any other fd not counted; added to Bytes.Unmodelled
//
// Limits, stated rather than hidden:
//   - A read from a regular file, a socket or a terminal copies too, but
//     the model covers only the descriptors transfer paths use. Such
//     bytes are reported as Unmodelled so that a reader can see them; in
//     fentry mode, page-cache reads through copy_page_to_iter are counted
//     as kernel copies.
//   - ioctl on /dev/knem is not counted from the syscall: its return value
//     is a status, not a byte count, and the module's own tracepoint gives
//     both the length and the engine exactly. The device is recognised by
//     its device number, read from /sys/class/misc/knem/dev at Open: load
//     the module before opening the probe.
//   - splice between a pipe and a file or socket, and sendfile, copy_file_range
//     and io_uring are not modelled (Unmodelled, or not seen at all).
//   - A call already blocked when tracking starts is not counted: its entry
//     was missed.
//   - The syscall numbers and the uprobe's register ABI are those of
//     x86-64.
//
// # The job
//
// Copies are counted for the processes in a BPF hash map keyed by tgid.
// Track adds a process, TrackChildren a launcher whose children (forked
// after the call, and theirs) are counted but whose own copies are not; a
// task_newtask tracepoint adds children as they are forked and a
// sched_process_exit program removes a process when its leader exits, so
// that a recycled pid is not counted. Copies by other processes, including
// the launcher reading its ranks' output, are excluded.
//
// # Cache pollution
//
// Table 2 of the paper counts L2 misses with PAPI. OpenCacheMissCounter
// gives the hardware counter where perf_event_open has one, and says
// ErrNoCacheCounters where it has not (as in most VMs). MeasurePollution measures
// the effect directly instead: how much slower the receiving process
// re-reads a cache-sized working set after each transfer than without one.
//
// # Requirements
//
// Root (or CAP_BPF with CAP_PERFMON), tracefs (mounted at
// /sys/kernel/tracing by Open when it is not), kernel BTF for the fd
// classification and for fentry. The BPF object is generated from
// copyprobe.bpf.c by bpf2go with clang-14 and committed; `make
// check-bpf-generate` regenerates it and fails if anything changed.
package copyprobe
