//go:build ignore

// SPDX-License-Identifier: (MIT OR GPL-2.0-only)
//
// Copy-counting probes for knemesis. The Go side (probe.go) loads only the
// programs a mode needs, sets the tracepoint field offsets below from the
// kernel's format files, and fills job_tgids with the processes to count.
//
// The file includes no kernel or libc header besides libbpf's, so that the
// object bpf2go produces depends on nothing but this file and the libbpf-dev
// headers: regenerating it anywhere gives the same bytes.

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed int __s32;
typedef signed long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
};

enum {
	BPF_ANY = 0,
};

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Indexes of the per-CPU byte counters; keep in step with counters.go. */
enum counter {
	COUNT_USER = 0,         /* bytes copied by memcopy.Copy */
	COUNT_KERNEL = 1,       /* kernel CPU copies seen by fentry or the syscall model */
	COUNT_MODULE_CPU = 2,   /* knem_copy events with a CPU engine */
	COUNT_DMA = 3,          /* knem_copy events with the DMA engine */
	COUNT_UNMODELLED = 4,   /* syscall bytes through fds the model does not cover */
	COUNT_BAD_ENGINE = 5,   /* knem_copy events with an engine outside the contract */
	COUNT_MAX,
};

/* Values in job_tgids. */
enum track {
	TRACK_COUNT = 1,       /* count this process's copies, and its children's */
	TRACK_CHILDREN = 2,    /* count only the children it forks from now on */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);   /* tgid */
	__type(value, __u32); /* enum track */
} job_tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/*
 * Copies the syscall model charges to the call a thread is in, keyed by
 * thread id. LRU, because a thread that dies inside a call (exit_group from
 * another thread) never reaches sys_exit.
 */
struct inflight {
	__u8 copies;      /* kernel copies per returned byte: 0 or 1 */
	__u8 modelled;    /* 0: count the bytes as unmodelled */
	__u8 in_knem;     /* an ioctl on /dev/knem: its tracepoint counts */
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, struct inflight);
} inflight SEC(".maps");

static __always_inline void count(__u32 which, __u64 bytes)
{
	__u64 *slot = bpf_map_lookup_elem(&counters, &which);

	if (slot)
		*slot += bytes; /* per-CPU: no other writer */
}

static __always_inline int tgid_counted(__u32 tgid)
{
	__u32 *track = bpf_map_lookup_elem(&job_tgids, &tgid);

	return track && *track == TRACK_COUNT;
}

static __always_inline int current_counted(void)
{
	return tgid_counted(bpf_get_current_pid_tgid() >> 32);
}

/* ---- the job's process tree ---- */

#define CLONE_THREAD 0x00010000

/* sched/task_newtask; probe.go checks these offsets against the format. */
struct task_newtask_args {
	__u64 common;
	__s32 pid;
	char comm[16];
	__u32 pad;
	__u64 clone_flags;
};

SEC("tracepoint/task/task_newtask")
int follow_fork(struct task_newtask_args *ctx)
{
	__u32 parent = bpf_get_current_pid_tgid() >> 32;
	__u32 child = ctx->pid;
	__u32 value = TRACK_COUNT;

	if (ctx->clone_flags & CLONE_THREAD)
		return 0; /* a thread of a process already keyed by tgid */
	if (!bpf_map_lookup_elem(&job_tgids, &parent))
		return 0;
	bpf_map_update_elem(&job_tgids, &child, &value, BPF_ANY);
	return 0;
}

SEC("tracepoint/sched/sched_process_exit")
int forget_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;

	/* The leader exits last but one at worst; its tgid may be reused. */
	if ((__u32)id == tgid)
		bpf_map_delete_elem(&job_tgids, &tgid);
	return 0;
}

/* ---- user-space copies: uprobe on memcopy.Copy ---- */

/* struct pt_regs on x86-64, as the kernel lays it out for uprobes. */
struct x86_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	__u64 ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

/*
 * Copy(dst, src []byte) under Go's register ABI (ABIInternal, amd64):
 * dst = (AX, BX, CX), src = (DI, SI, R8). Read at entry: a uretprobe would
 * rewrite the return address, which Go's stack growth cannot cope with.
 */
SEC("uprobe/memcopy_copy")
int memcopy_copy(struct x86_regs *regs)
{
	__u64 dst_len = regs->bx;
	__u64 src_len = regs->si;

	if (!current_counted())
		return 0;
	count(COUNT_USER, dst_len < src_len ? dst_len : src_len);
	return 0;
}

/* ---- kernel CPU copies, fentry mode ---- */

static __always_inline int in_knem_ioctl(void)
{
	__u32 tid = bpf_get_current_pid_tgid();
	struct inflight *m = bpf_map_lookup_elem(&inflight, &tid);

	return m && m->in_knem;
}

static __always_inline void count_page_copy(__u64 copied)
{
	/*
	 * knem's CPU engine copies to an unpinned user buffer through
	 * copy_page_to_iter too; knem_copy already counts those bytes.
	 */
	if (current_counted() && !in_knem_ioctl())
		count(COUNT_KERNEL, copied);
}

/*
 * Two sets of hooks, chosen by attach.go. Preferred: the page copy routines
 * themselves (pipe_write and process_vm_writev copy through
 * copy_page_from_iter, pipe_read and process_vm_readv through
 * copy_page_to_iter); the iov_iter helpers they call are not hooked, which
 * would count the same bytes twice. Some kernels build lib/iov_iter.c
 * without ftrace (Debian 6.1: attaching fails with EBUSY); there the
 * functions that make a transfer's one copy are hooked instead, and their
 * return value is the count: the pipe's read and write methods,
 * pipe_to_user (vmsplice out of a pipe) and process_vm_rw. Each program
 * reads the return value at the index the target's argument count puts it.
 * Where none of these attaches for CMA (6.1: process_vm_rw has 7 arguments,
 * one more than its trampolines take), attach.go counts it with the
 * syscall model.
 */
/* A negative return is an error, not a count. */
static __always_inline void count_returned(__s64 ret)
{
	if (ret > 0)
		count_page_copy(ret);
}

SEC("fexit/copy_page_to_iter")
int fexit_ret4(__u64 *ctx)
{
	/* copy_page_*_iter(page, offset, bytes, iter) -> size_t */
	count_page_copy(ctx[4]);
	return 0;
}

SEC("fexit/pipe_read")
int fexit_ret2(__u64 *ctx)
{
	/* pipe_read, pipe_write(kiocb, iter) -> ssize_t */
	count_returned((__s64)ctx[2]);
	return 0;
}

SEC("fexit/pipe_to_user")
int fexit_ret3(__u64 *ctx)
{
	/* pipe_to_user(pipe, buf, sd) -> int */
	count_returned((__s32)ctx[3]);
	return 0;
}

SEC("fexit/process_vm_rw")
int fexit_ret7(__u64 *ctx)
{
	/* process_vm_rw(pid, lvec, liovcnt, rvec, riovcnt, flags, vm_write) -> ssize_t */
	count_returned((__s64)ctx[7]);
	return 0;
}

/* ---- kernel CPU copies, syscall tracepoint mode ---- */

/* The common layout of syscalls/sys_enter_* and sys_exit_*. */
struct sys_enter_args {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__u64 args[6];
};

struct sys_exit_args {
	__u64 common;
	__s32 nr;
	__u32 pad;
	__s64 ret;
};

/* x86-64 syscall numbers. */
enum {
	NR_read = 0,
	NR_write = 1,
	NR_ioctl = 16,
	NR_readv = 19,
	NR_writev = 20,
	NR_splice = 275,
	NR_vmsplice = 278,
	NR_process_vm_readv = 310,
	NR_process_vm_writev = 311,
};

/* Just what the fd lookup reads; CO-RE finds each field in the running kernel. */
struct inode {
	unsigned short i_mode;
	__u32 i_rdev;
} __attribute__((preserve_access_index));

struct file {
	unsigned int f_mode;
	struct inode *f_inode;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct task_struct {
	struct files_struct *files;
} __attribute__((preserve_access_index));

#define S_IFMT 00170000
#define S_IFIFO 0010000
#define S_IFCHR 0020000
#define FMODE_READ 0x1
#define FMODE_WRITE 0x2

/* The kernel dev_t of /dev/knem, set by attach.go; 0 when not loaded. */
volatile const __u32 knem_rdev = 0;

enum fd_kind {
	FD_OTHER = 0,
	FD_PIPE_READ = 1,  /* pipe (or FIFO) end open for reading */
	FD_PIPE_WRITE = 2, /* pipe end open for writing */
	FD_KNEM = 3,       /* the knem device */
};

static __always_inline enum fd_kind fd_kind(__u64 fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *file = 0;
	struct inode *inode;
	unsigned int mode, type;

	if (!fdt || fd >= BPF_CORE_READ(fdt, max_fds))
		return FD_OTHER;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]) || !file)
		return FD_OTHER;
	inode = BPF_CORE_READ(file, f_inode);
	type = BPF_CORE_READ(inode, i_mode) & S_IFMT;
	if (type == S_IFCHR && knem_rdev && BPF_CORE_READ(inode, i_rdev) == knem_rdev)
		return FD_KNEM;
	if (type != S_IFIFO)
		return FD_OTHER;
	mode = BPF_CORE_READ(file, f_mode);
	if (mode & FMODE_WRITE)
		return FD_PIPE_WRITE;
	if (mode & FMODE_READ)
		return FD_PIPE_READ;
	return FD_OTHER;
}

/*
 * The model, per call, of how many times the kernel CPU copies each byte the
 * call reports as transferred (the table is in doc.go). Returns 0 for a call
 * not to record at all.
 */
static __always_inline int model(struct sys_enter_args *ctx, struct inflight *mp)
{
	struct inflight m = {};
	enum fd_kind in, out;

	switch (ctx->nr) {
	case NR_read:
	case NR_readv:
	case NR_write:
	case NR_writev:
		/* pipe_read/pipe_write copy every byte once, vmspliced or not */
		in = fd_kind(ctx->args[0]);
		if (in == FD_PIPE_READ || in == FD_PIPE_WRITE)
			m = (struct inflight){ .copies = 1, .modelled = 1 };
		break;
	case NR_vmsplice:
		in = fd_kind(ctx->args[0]);
		if (in == FD_PIPE_WRITE) /* pages are referenced, not copied */
			m = (struct inflight){ .copies = 0, .modelled = 1 };
		else if (in == FD_PIPE_READ) /* vmsplice_to_user copies */
			m = (struct inflight){ .copies = 1, .modelled = 1 };
		break;
	case NR_splice:
		in = fd_kind(ctx->args[0]);
		out = fd_kind(ctx->args[2]);
		if ((in == FD_PIPE_READ || in == FD_PIPE_WRITE) &&
		    (out == FD_PIPE_READ || out == FD_PIPE_WRITE)) /* buffers move by reference */
			m = (struct inflight){ .copies = 0, .modelled = 1 };
		break;
	case NR_process_vm_readv:
	case NR_process_vm_writev:
		m = (struct inflight){ .copies = 1, .modelled = 1 };
		break;
	case NR_ioctl:
		/* returns a status, not bytes: only mark knem's, whose copies its tracepoint counts */
		if (fd_kind(ctx->args[0]) != FD_KNEM)
			return 0;
		m = (struct inflight){ .copies = 0, .modelled = 1, .in_knem = 1 };
		break;
	}
	*mp = m;
	return 1;
}

SEC("tracepoint/syscalls/sys_enter")
int syscall_enter(struct sys_enter_args *ctx)
{
	__u32 tid = bpf_get_current_pid_tgid();
	struct inflight m;

	if (!current_counted() || !model(ctx, &m))
		return 0;
	bpf_map_update_elem(&inflight, &tid, &m, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit")
int syscall_exit(struct sys_exit_args *ctx)
{
	__u32 tid = bpf_get_current_pid_tgid();
	struct inflight *m = bpf_map_lookup_elem(&inflight, &tid);
	__s64 ret = ctx->ret;

	if (!m)
		return 0;
	if (ret > 0) {
		if (!m->modelled)
			count(COUNT_UNMODELLED, ret);
		else
			count(COUNT_KERNEL, (__u64)ret * m->copies);
	}
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

/* ---- the knem module's copies ---- */

/*
 * Offsets of knem:knem_copy's fields, read by probe.go from the event's
 * format file when the module is loaded: u64 length, u32 engine, s32 pid.
 */
volatile const __u32 knem_length_off = 8;
volatile const __u32 knem_engine_off = 16;
volatile const __u32 knem_pid_off = 20;

enum {
	KNEM_ENGINE_CALLER = 0,  /* CPU copy in the calling process */
	KNEM_ENGINE_KTHREAD = 1, /* CPU copy on the module's kernel thread */
	KNEM_ENGINE_DMA = 2,     /* DMA engine */
};

SEC("tracepoint/knem/knem_copy")
int knem_copy(void *ctx)
{
	__u64 length = 0;
	__u32 engine = 0;
	__s32 pid = 0;

	bpf_probe_read_kernel(&pid, sizeof(pid), ctx + knem_pid_off);
	/* the event's pid, not current: a kthread or DMA completion copies for it */
	if (pid <= 0 || !tgid_counted(pid))
		return 0;
	bpf_probe_read_kernel(&length, sizeof(length), ctx + knem_length_off);
	bpf_probe_read_kernel(&engine, sizeof(engine), ctx + knem_engine_off);
	switch (engine) {
	case KNEM_ENGINE_CALLER:
	case KNEM_ENGINE_KTHREAD:
		count(COUNT_MODULE_CPU, length);
		break;
	case KNEM_ENGINE_DMA:
		count(COUNT_DMA, length);
		break;
	default:
		count(COUNT_BAD_ENGINE, length);
	}
	return 0;
}
