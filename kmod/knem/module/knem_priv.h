/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private interfaces between the files of the knem module.
 *
 *   knem_main.c    device, file operations, ioctl dispatch, parameters
 *   knem_region.c  pinned regions, the global cookie table, lifetimes
 *   knem_copy.c    copy commands: argument checks, length, engine choice
 *   knem_cpu.c     CPU copy engine, in the caller or on the context kthread
 *   knem_dma.c     dmaengine copy engine and its chained status write
 *   knem_status.c  the mmap'ed status array and NOTIFY_FD completions
 *   knem_stats.c   counters and the statistics text read() returns
 */
#ifndef KNEM_PRIV_H
#define KNEM_PRIV_H

#include <linux/kref.h>
#include <linux/rcupdate.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/kfifo.h>
#include <linux/kthread.h>
#include <linux/cpumask.h>
#include <linux/uidgid.h>
#include <linux/uio.h>
#include <linux/workqueue.h>
#include <linux/poll.h>
#include <linux/mman.h>

#include "knem_io.h"

/* Values of the knem_copy tracepoint's engine field (an external contract). */
enum knem_engine {
	KNEM_ENGINE_CPU = 0,		/* CPU copy in the calling task */
	KNEM_ENGINE_THREAD = 1,		/* CPU copy on the context kthread */
	KNEM_ENGINE_DMA = 2,		/* dmaengine copy */
	KNEM_ENGINE_NR
};

#define KNEM_FLAGS_ALL		0xffU
#define KNEM_PROT_ALL		(PROT_READ | PROT_WRITE)
#define KNEM_MAX_DMA_CHANS	32
#define KNEM_FAST_IOVECS	8	/* iovec lists this short stay on the stack */

/* Module parameters (knem_main.c). */
extern unsigned int knem_max_iovecs;
extern unsigned int knem_max_regions;
extern unsigned long knem_max_pinned_pages;
extern unsigned long knem_max_status_slots;
extern bool knem_dma_enable;

/* Per open file. */
struct knem_ctx {
	struct kref kref;
	kuid_t uid;
	pid_t tgid;

	/* Regions this file created; under knem_regions_lock. */
	struct list_head regions;
	unsigned int nr_regions;
	atomic_long_t pinned_pages;

	struct mutex lock;		/* status array setup, worker, binding */
	knem_status_t *status;		/* vmalloc_user'ed, set once by mmap */
	unsigned long status_slots;
	struct kthread_worker *worker;	/* MEMCPYTHREAD / DMATHREAD */
	cpumask_var_t offload_cpus;
	bool offload_bound;

	/* Asynchronous copies not yet finished; release waits for zero. */
	atomic_t inflight;
	wait_queue_head_t inflight_wq;

	/* Channels this file's DMA copies used, synchronized on release. */
	struct dma_chan *dma_chans[KNEM_MAX_DMA_CHANS];
	spinlock_t dma_chans_lock;

	/* NOTIFY_FD completions: status indexes waiting for read(). */
	spinlock_t notify_lock;
	DECLARE_KFIFO_PTR(notify, u32);
	wait_queue_head_t notify_wq;
	atomic_t notify_reserved;	/* queued + promised indexes */
};

/* One user iovec list turned into pinned pages. */
struct knem_seg {
	unsigned long first_page;	/* index in pages[] */
	unsigned int offset;		/* in that page */
	u64 len;
};

struct knem_pinned {
	struct page **pages;
	unsigned long nr_pages;
	struct knem_seg *segs;
	unsigned int nr_segs;
	u64 length;
	bool writable;
	struct knem_ctx *charged;	/* pinned-page accounting, referenced */
};

struct knem_region {
	struct kref kref;
	struct hlist_node hash;		/* in the cookie table while linked */
	struct rcu_head rcu;
	struct list_head ctx_link;	/* in owner->regions while linked */
	bool linked;
	knem_cookie_t cookie;
	struct knem_ctx *owner;		/* referenced */
	kuid_t uid;
	u32 flags;
	u32 prot;
	struct knem_pinned pin;
};

/* Walks a pinned list page by page. */
struct knem_cursor {
	const struct knem_pinned *pin;
	unsigned int seg;
	u64 seg_off;
	u64 left;			/* bytes still to walk */
};

/* One copy request, possibly outliving the ioctl. */
struct knem_xfer {
	struct knem_ctx *ctx;		/* referenced */
	struct knem_region *src;	/* referenced, pinned */
	struct knem_region *dst;	/* referenced; NULL on the user_iter side */
	/* Unpinned local side (synchronous CPU copies only). */
	bool has_user_iter;
	bool user_is_dst;
	bool on_heap;			/* async copies outlive the ioctl */
	struct iov_iter user_iter;
	struct iovec *user_iov;		/* backing array of user_iter */
	struct iovec fast_iov[KNEM_FAST_IOVECS];
	bool status_by_dma;		/* chained DMA copy wrote SUCCESS */
	bool thread_dma;		/* DMATHREAD: DMA waited for on the kthread */
	enum knem_engine engine;	/* who copied, for stats and trace */
	u64 src_off;
	u64 dst_off;
	u64 length;
	u32 flags;
	u32 status_index;
	bool async;
	pid_t tgid;
	struct kthread_work work;	/* MEMCPYTHREAD / DMATHREAD */
	struct work_struct done_work;	/* chained DMA completion */
	struct knem_dma_map *map;	/* DMA mappings to undo at completion */
};

/* knem_region.c */
extern spinlock_t knem_regions_lock;
void knem_ctx_get(struct knem_ctx *ctx);
void knem_ctx_put(struct knem_ctx *ctx);
int knem_pin_iovecs(struct knem_ctx *ctx, u64 uptr, u32 nr, bool writable,
		    struct knem_pinned *pin);
void knem_unpin(struct knem_pinned *pin);
int knem_iovecs_import(u64 uptr, u32 nr, struct iovec *fast,
		       struct iovec **iov, u64 *total);
void knem_iovecs_free(struct iovec *iov, struct iovec *fast);
struct knem_region *knem_region_alloc(struct knem_ctx *ctx, u32 flags,
				      u32 prot);
int knem_region_create(struct knem_ctx *ctx, u64 iovecs, u32 nr, u32 flags,
		       u32 prot, knem_cookie_t *cookie);
int knem_region_destroy(struct knem_ctx *ctx, knem_cookie_t cookie);
struct knem_region *knem_region_lookup(struct knem_ctx *ctx,
				       knem_cookie_t cookie, u32 need_prot);
void knem_region_put(struct knem_region *region);
void knem_regions_release(struct knem_ctx *ctx);
void knem_cursor_init(struct knem_cursor *cur, const struct knem_pinned *pin,
		      u64 offset, u64 length);
bool knem_cursor_next(struct knem_cursor *cur, u64 max, struct page **page,
		      unsigned int *offset, unsigned int *len);
u64 knem_bytes_after(u64 total, u64 offset);

/* knem_copy.c */
long knem_ioctl_copy(struct knem_ctx *ctx, unsigned int cmd,
		     void __user *arg);
void knem_xfer_finish(struct knem_xfer *xfer, int err, enum knem_engine eng);

/* knem_cpu.c */
int knem_cpu_copy(struct knem_xfer *xfer);
int knem_thread_submit(struct knem_xfer *xfer, bool dma);
int knem_bind_offload(struct knem_ctx *ctx, void __user *arg);
void knem_thread_stop(struct knem_ctx *ctx);

/* knem_dma.c */
int knem_dma_init(void);
void knem_dma_exit(void);
bool knem_dma_usable(void);
int knem_dma_copy(struct knem_xfer *xfer, bool chain_status);
void knem_dma_ctx_sync(struct knem_ctx *ctx);

/* knem_status.c */
int knem_status_mmap(struct knem_ctx *ctx, struct vm_area_struct *vma);
int knem_status_check(struct knem_ctx *ctx, u32 index);
void knem_status_set(struct knem_ctx *ctx, u32 index, knem_status_t value);
bool knem_notify_reserve(struct knem_ctx *ctx);
void knem_notify_unreserve(struct knem_ctx *ctx);
void knem_notify_push(struct knem_ctx *ctx, u32 index);
ssize_t knem_notify_read(struct knem_ctx *ctx, struct file *file,
			 char __user *buf, size_t count);
__poll_t knem_notify_poll(struct knem_ctx *ctx, struct file *file,
			  poll_table *wait);
int knem_notify_init(struct knem_ctx *ctx);
void knem_status_free(struct knem_ctx *ctx);

/* knem_stats.c */
enum knem_stat {
	KNEM_STAT_REGIONS_CREATED,
	KNEM_STAT_REGIONS_DESTROYED,
	KNEM_STAT_COPIES_CPU,
	KNEM_STAT_COPIES_THREAD,
	KNEM_STAT_COPIES_DMA,
	KNEM_STAT_BYTES_CPU,
	KNEM_STAT_BYTES_THREAD,
	KNEM_STAT_BYTES_DMA,
	KNEM_STAT_COPIES_FAILED,
	KNEM_STAT_DMA_FALLBACKS,
	KNEM_STAT_NR
};
void knem_stat_add(enum knem_stat stat, u64 value);
void knem_pinned_add(long pages);
long knem_pinned_total(void);
ssize_t knem_stats_read(struct knem_ctx *ctx, char __user *buf, size_t count,
			loff_t *ppos);

#endif /* KNEM_PRIV_H */
