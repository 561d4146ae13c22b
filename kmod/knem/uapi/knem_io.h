/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause */
/*
 * knem_io.h - user ABI of /dev/knem, KNEM ABI version 0xd.
 *
 * This header is the one source of truth for the ABI: the kernel module,
 * the Go bindings (through cgo) and the C tests all include it.  Existing
 * KNEM clients (Open MPI, UCX, MPICH, PSM) speak exactly this ABI, so no
 * value or layout here may change.
 *
 * Every structure is 64-bit clean with explicit padding, so a 32-bit process
 * on a 64-bit kernel passes the same bytes and compat_ioctl shares the
 * native handler.  Pointers travel as __u64.
 *
 * The ioctl direction bits are the reverse of what the data flow suggests
 * (GET_INFO is _IOW although the kernel fills it).  They are kept because
 * clients compare the numeric values; the driver does not rely on them.
 */
#ifndef _UAPI_KNEM_IO_H
#define _UAPI_KNEM_IO_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioctl.h>
#else
#include <linux/types.h>
#include <sys/ioctl.h>
#endif

#define KNEM_ABI_VERSION	0xd
#define KNEM_DEVICE_NAME	"knem"
#define KNEM_DEVICE_FILENAME	"/dev/knem"

/* Identifies a region; 0 never names one (clients use it as "none"). */
typedef __u64 knem_cookie_t;

/* One byte per slot of the status array mapped at offset 0 of the device. */
typedef __u8 knem_status_t;
#define KNEM_STATUS_PENDING	0
#define KNEM_STATUS_SUCCESS	1
#define KNEM_STATUS_FAILED	2

/* GET_INFO features */
#define KNEM_FEATURE_DMA	(1U << 0)	/* a DMA_MEMCPY channel is usable */
#define KNEM_FEATURE_ATTACH	(1U << 1)	/* ATTACH_REGION (knemesis) */
#define KNEM_FEATURE_INVALIDATE	(1U << 2)	/* KNEM_FLAG_INVALIDATE_STATUS */

/* Flags of region creation and of copies. */
#define KNEM_FLAG_DMA			(1U << 0)
#define KNEM_FLAG_ASYNCDMACOMPLETE	(1U << 1)
#define KNEM_FLAG_DMATHREAD		(1U << 2)
#define KNEM_FLAG_MEMCPYTHREAD		(1U << 3)
#define KNEM_FLAG_PINLOCAL		(1U << 4)
#define KNEM_FLAG_SINGLEUSE		(1U << 5)
#define KNEM_FLAG_NOTIFY_FD		(1U << 6)
#define KNEM_FLAG_ANY_USER_ACCESS	(1U << 7)

/*
 * CREATE_REGION only, a knemesis extension behind KNEM_FEATURE_INVALIDATE:
 * the creator's status slot invalidate_status is set to SUCCESS when the
 * region is created and to FAILED as soon as any of its address range may
 * map other pages than the region pinned (munmap, mremap, MADV_DONTNEED,
 * ...), so a registration cache learns without a system call that a
 * region no longer shows its buffer.  Needs the status array and a
 * persistent region (SINGLEUSE with it is EINVAL); copies and INIT_SEND
 * with it are EINVAL.
 */
#define KNEM_FLAG_INVALIDATE_STATUS	(1U << 8)

/* BIND_OFFLOAD flags: where the per-context kernel thread may run. */
#define KNEM_BIND_FLAG_CUSTOM		(1U << 0)	/* mask_ptr/mask_len */
#define KNEM_BIND_FLAG_CURRENT		(1U << 1)	/* caller's CPUs */
#define KNEM_BIND_FLAG_CURRENT_REVERSED	(1U << 2)	/* all but those */

struct knem_cmd_info {
	__u32 abi;		/* out: KNEM_ABI_VERSION */
	__u32 features;		/* out: KNEM_FEATURE_* */
	__u32 ignored_flags;	/* out: flags the driver accepts but ignores */
	__u32 forced_flags;	/* out: flags the driver always applies */
};

struct knem_cmd_bind_offload {
	__u32 flags;		/* KNEM_BIND_FLAG_* */
	__u32 mask_len;		/* bytes at mask_ptr (CUSTOM) */
	__u64 mask_ptr;		/* user pointer to a CPU bitmap */
};

struct knem_cmd_param_iovec {
	__u64 base;
	__u64 len;
};

struct knem_cmd_create_region {
	__u64 iovec_array;	/* struct knem_cmd_param_iovec[iovec_nr] */
	__u32 iovec_nr;
	__u32 flags;		/* SINGLEUSE, ANY_USER_ACCESS */
	__u32 protection;	/* PROT_READ | PROT_WRITE */
	__u32 invalidate_status; /* slot, with INVALIDATE_STATUS; else pad */
	knem_cookie_t cookie;	/* out */
};

struct knem_cmd_copy_bounded {
	knem_cookie_t src_cookie;
	__u64 src_offset;
	knem_cookie_t dst_cookie;
	__u64 dst_offset;
	__u64 length;
	__u32 flags;
	__u32 current_status;	/* out: KNEM_STATUS_* */
	__u32 async_status_index;
	__u32 pad;
};

struct knem_cmd_copy {
	knem_cookie_t src_cookie;
	__u64 src_offset;
	knem_cookie_t dst_cookie;
	__u64 dst_offset;
	__u32 flags;
	__u32 current_status;	/* out: KNEM_STATUS_* */
	__u32 async_status_index;
	__u32 pad;
};

struct knem_cmd_inline_copy_bounded {
	__u64 local_iovec_array;	/* struct knem_cmd_param_iovec[] */
	__u32 local_iovec_nr;
	__u32 write;			/* 0: remote -> local, 1: local -> remote */
	knem_cookie_t remote_cookie;
	__u64 remote_offset;
	__u64 length;
	__u32 flags;
	__u32 current_status;		/* out: KNEM_STATUS_* */
	__u32 async_status_index;
	__u32 pad;
};

struct knem_cmd_inline_copy {
	__u64 local_iovec_array;	/* struct knem_cmd_param_iovec[] */
	__u32 local_iovec_nr;
	__u32 write;			/* 0: remote -> local, 1: local -> remote */
	knem_cookie_t remote_cookie;
	__u64 remote_offset;
	__u32 flags;
	__u32 current_status;		/* out: KNEM_STATUS_* */
	__u32 async_status_index;
	__u32 pad;
};

/* Old (pre-region) API: a send is a read-only single-use region. */
struct knem_cmd_init_send_param {
	__u64 send_iovec_array;
	__u32 send_iovec_nr;
	__u32 flags;
	knem_cookie_t send_cookie;	/* out */
};

struct knem_cmd_init_async_recv_param {
	__u64 recv_iovec_array;
	__u32 recv_iovec_nr;
	__u32 status_index;
	knem_cookie_t send_cookie;
	__u32 flags;
	__u32 pad;
};

struct knem_cmd_sync_recv_param {
	__u64 recv_iovec_array;
	__u32 recv_iovec_nr;
	__u32 status;			/* out: KNEM_STATUS_* */
	knem_cookie_t send_cookie;
	__u32 flags;
	__u32 pad;
};

/*
 * Region attach, a knemesis extension behind KNEM_FEATURE_ATTACH (ABI 0xd
 * and every command above are unchanged): map a region one may copy from
 * (and, with PROT_WRITE, to) into one's own address space and copy with
 * plain loads and stores.  ATTACH_REGION checks the cookie as a copy does
 * (EINVAL, EPERM, EACCES; SINGLEUSE regions and regions whose iovecs do not
 * join page to page are EINVAL) and returns an mmap offset of the
 * descriptor; mmap(MAP_SHARED) there, with at most the attached protection,
 * maps map_length bytes (or a page-aligned part of them) whose byte
 * data_offset is the region's first byte.  The mapping holds the region's
 * pages until it is unmapped, also after the region is destroyed or its
 * creator exits; the attachment itself lasts until DETACH_REGION (its
 * offset) or close, and maps again only while the region lives.
 */
struct knem_cmd_attach_region {
	knem_cookie_t cookie;	/* the region */
	__u32 protection;	/* PROT_READ, optionally | PROT_WRITE */
	__u32 flags;		/* 0 */
	__u64 offset;		/* out: mmap offset of the attachment */
	__u64 map_length;	/* out: bytes of the whole mapping */
	__u64 data_offset;	/* out: the region's first byte in the mapping */
	__u64 data_length;	/* out: the region's length */
};

#define KNEM_CMD_MAGIC	'K'

#define KNEM_CMD_GET_INFO	_IOW(KNEM_CMD_MAGIC, 0x10, struct knem_cmd_info)
#define KNEM_CMD_BIND_OFFLOAD	_IOR(KNEM_CMD_MAGIC, 0x11, struct knem_cmd_bind_offload)
#define KNEM_CMD_INIT_SEND	_IOWR(KNEM_CMD_MAGIC, 0x20, struct knem_cmd_init_send_param)
#define KNEM_CMD_CREATE_REGION	_IOWR(KNEM_CMD_MAGIC, 0x21, struct knem_cmd_create_region)
#define KNEM_CMD_DESTROY_REGION	_IOR(KNEM_CMD_MAGIC, 0x22, knem_cookie_t)
#define KNEM_CMD_INIT_ASYNC_RECV _IOR(KNEM_CMD_MAGIC, 0x30, struct knem_cmd_init_async_recv_param)
#define KNEM_CMD_SYNC_RECV	_IOR(KNEM_CMD_MAGIC, 0x31, struct knem_cmd_sync_recv_param)
#define KNEM_CMD_COPY		_IOR(KNEM_CMD_MAGIC, 0x32, struct knem_cmd_copy)
#define KNEM_CMD_INLINE_COPY	_IOR(KNEM_CMD_MAGIC, 0x33, struct knem_cmd_inline_copy)
#define KNEM_CMD_COPY_BOUNDED	_IOR(KNEM_CMD_MAGIC, 0x34, struct knem_cmd_copy_bounded)
#define KNEM_CMD_INLINE_COPY_BOUNDED \
	_IOR(KNEM_CMD_MAGIC, 0x35, struct knem_cmd_inline_copy_bounded)
#define KNEM_CMD_ATTACH_REGION	\
	_IOWR(KNEM_CMD_MAGIC, 0x40, struct knem_cmd_attach_region)
#define KNEM_CMD_DETACH_REGION	_IOW(KNEM_CMD_MAGIC, 0x41, __u64)

/*
 * Asynchronous copies (current_status PENDING on return) finish by setting
 * their status slot to SUCCESS or FAILED.  With KNEM_FLAG_NOTIFY_FD (only
 * with MEMCPYTHREAD or DMATHREAD, never ASYNCDMACOMPLETE: EINVAL) the slot
 * index is also queued on the file descriptor, in a queue of as many
 * entries as status slots (a submission that would overflow it: EBUSY).
 * read() of N bytes (a multiple of 4, else EINVAL) on a descriptor opened
 * for writing blocks until N / 4 indexes (__u32) are queued, or returns
 * what is queued with O_NONBLOCK (EAGAIN if nothing); poll() reports
 * POLLIN while some are queued, POLLERR without a status array.  read()
 * on a read-only descriptor returns human-readable statistics instead,
 * and every ioctl on it fails with EBADF.
 */
typedef __u32 knem_notify_index_t;

#endif /* _UAPI_KNEM_IO_H */
