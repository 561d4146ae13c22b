/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Private interfaces between the files of the knem module.
 *
 *   knem_main.c    device, file operations, ioctl dispatch, parameters
 *   knem_region.c  pinned regions, the global cookie table, lifetimes
 *   knem_attach.c  region attach: mmap of a region's pages
 *   knem_watch.c   invalidation status: a slot failed when a range changes
 *   knem_account.c locked_vm / RLIMIT_MEMLOCK and per-user region counts
 *   knem_copy.c    copy commands: argument checks, length, engine choice
 *   knem_cpu.c     CPU copy engine, in the caller or on a shared workqueue;
 *                  a file's queue of asynchronous copies
 *   knem_dma.c     dmaengine copy engine: lanes over several channels,
 *                  per-descriptor results, timeouts
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
#include <linux/rhashtable.h>
#include <linux/mm_types.h>
#include <linux/xarray.h>
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
	KNEM_ENGINE_THREAD = 1,		/* CPU copy offloaded to a kernel worker */
	KNEM_ENGINE_DMA = 2,		/* dmaengine copy */
	KNEM_ENGINE_NR
};

#define KNEM_FLAGS_ALL		0xffU
#define KNEM_PROT_ALL		(PROT_READ | PROT_WRITE)
#define KNEM_MAX_DMA_CHANS	32
#define KNEM_FAST_IOVECS	8	/* iovec lists this short stay on the stack */

/*
 * Every allocation made on a caller's behalf: charged to its memory cgroup,
 * and allowed to fail there (ENOMEM to the caller) rather than wake the
 * OOM killer, which __GFP_RETRY_MAYFAIL keeps away from memcg charges.
 */
#define KNEM_GFP	(GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL | __GFP_NOWARN)

/* Module parameters (knem_main.c). */
extern unsigned int knem_max_iovecs;
extern unsigned long knem_max_user_regions;
extern unsigned long knem_max_status_slots;
extern unsigned int knem_max_queued_copies;
extern unsigned int knem_dma_timeout_ms;
extern unsigned int knem_dma_channels;
extern unsigned int knem_dma_split_min;
extern bool knem_dma_enable;

/* Per open file. */
struct knem_ctx {
	struct kref kref;
	pid_t tgid;

	/* Regions this file created and still publishes. */
	spinlock_t regions_lock;
	struct list_head regions;
	unsigned long nr_regions;
	atomic_long_t pinned_pages;

	struct mutex lock;		/* status array and notify queue setup */
	struct page **status_pages;	/* the array, set once by mmap */
	unsigned long status_nr_pages;
	unsigned long status_slots;

	/* BIND_OFFLOAD: CPUs offloaded copies run on, when bound. */
	spinlock_t offload_lock;
	cpumask_var_t offload_cpus;
	int offload_last;			/* last CPU used, -1 for none */
	bool offload_bound;

	/* Asynchronous copies not yet finished; release waits for zero. */
	atomic_t inflight;
	wait_queue_head_t inflight_wq;

	/*
	 * Asynchronous copies run one at a time, in submission order (as
	 * KNEM's per-file thread runs them): the head of the queue is the
	 * copy in flight.  Release sets closing: the copy in flight stops at
	 * its next chunk and the queued ones fail without copying.
	 */
	spinlock_t queue_lock;
	struct list_head queue;
	bool closing;

	/* Region attachments: id (mmap offset >> 32) -> knem_attach. */
	struct xarray attachments;

	/* Channels this file's DMA copies used, synchronized on release. */
	struct dma_chan *dma_chans[KNEM_MAX_DMA_CHANS];
	spinlock_t dma_chans_lock;

	/*
	 * NOTIFY_FD completions: a ring of status_slots indexes, allocated at
	 * the first NOTIFY_FD copy.  notify_reserved counts queued and
	 * promised entries, so a completion always finds room.
	 */
	spinlock_t notify_lock;		/* head, queued, ring contents */
	struct mutex notify_read_lock;	/* one reader takes entries at a time */
	u32 *notify_ring;
	unsigned long notify_head;
	unsigned long notify_queued;
	atomic_long_t notify_reserved;
	wait_queue_head_t notify_wq;
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
	struct knem_ctx *charged;	/* per-file statistics, referenced */
	struct user_struct *locked;	/* locked_vm charged, referenced */
	struct mm_struct *mm;		/* pinned_vm shown, mmgrab'ed */
};

struct knem_user;
struct knem_watch;

struct knem_region {
	struct kref kref;
	struct rhash_head node;		/* in the cookie table while linked */
	struct rcu_head rcu;
	struct list_head ctx_link;	/* in owner->regions while linked */
	atomic_t linked;		/* 1 while published; cleared once */
	knem_cookie_t cookie;
	struct knem_ctx *owner;		/* referenced */
	struct knem_user *user;		/* per-user region count, or NULL */
	kuid_t uid;			/* creator's euid */
	u32 flags;
	u32 prot;
	struct knem_pinned pin;
	struct knem_watch *watch;	/* INVALIDATE_STATUS, until unlinked */
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
	bool thread_dma;		/* offloaded DMA copy, waited for by a worker */
	enum knem_engine engine;	/* who copied, for stats and trace */
	u64 src_off;
	u64 dst_off;
	u64 length;
	u32 flags;
	u32 status_index;
	pid_t tgid;
	int cpu;			/* where it runs, nr_cpu_ids: unbound */
	struct list_head queued;	/* in ctx->queue */
	struct work_struct work;	/* offloaded copies */
};

/* knem_region.c */
int knem_regions_init(void);
void knem_regions_exit(void);
void knem_ctx_get(struct knem_ctx *ctx);
void knem_ctx_put(struct knem_ctx *ctx);
int knem_pin_iovecs(struct knem_ctx *ctx, u64 uptr, u32 nr, bool writable,
		    struct knem_pinned *pin);
int knem_pin_watched(struct knem_ctx *ctx, u64 uptr, u32 nr, bool writable,
		     struct knem_pinned *pin, struct knem_watch *watch);
void knem_unpin(struct knem_pinned *pin);
int knem_iovecs_import(u64 uptr, u32 nr, struct iovec *fast,
		       struct iovec **iov, u64 *total);
void knem_iovecs_free(struct iovec *iov, struct iovec *fast);
struct knem_region *knem_region_alloc(struct knem_ctx *ctx, u32 flags,
				      u32 prot);
int knem_region_create(struct knem_ctx *ctx, u64 iovecs, u32 nr, u32 flags,
		       u32 prot, u32 status_index, knem_cookie_t *cookie);
int knem_region_destroy(struct knem_ctx *ctx, knem_cookie_t cookie);
struct knem_region *knem_region_lookup(knem_cookie_t cookie, u32 need_prot);
struct knem_region *knem_region_get(knem_cookie_t cookie, u32 need_prot);
void knem_region_put(struct knem_region *region);
int knem_region_access(const struct knem_region *region);
void knem_regions_release(struct knem_ctx *ctx);
void knem_cursor_init(struct knem_cursor *cur, const struct knem_pinned *pin,
		      u64 offset, u64 length);
bool knem_cursor_next(struct knem_cursor *cur, u64 max, struct page **page,
		      unsigned int *offset, unsigned int *len);
u64 knem_bytes_after(u64 total, u64 offset);

/* knem_attach.c */
long knem_ioctl_attach(struct knem_ctx *ctx, void __user *arg);
int knem_detach(struct knem_ctx *ctx, u64 offset);
int knem_attach_mmap(struct knem_ctx *ctx, struct vm_area_struct *vma);
void knem_attachments_release(struct knem_ctx *ctx);

/* knem_watch.c */
struct knem_watch *knem_watch_alloc(struct knem_ctx *ctx, u32 index);
int knem_watch_start(struct knem_watch *w, const struct iovec *iov, u32 nr);
unsigned long knem_watch_begin(struct knem_watch *w);
bool knem_watch_arm(struct knem_watch *w, unsigned long seq, int tries);
void knem_watch_free(struct knem_watch *w);

/* knem_account.c */
int knem_lock_charge(unsigned long pages, struct user_struct **userp);
void knem_lock_uncharge(struct user_struct *user, unsigned long pages);
void knem_mm_account(struct mm_struct *mm, unsigned long pages);
void knem_mm_unaccount(struct mm_struct *mm, unsigned long pages);
struct knem_user *knem_user_charge(kuid_t uid);
void knem_user_uncharge(struct knem_user *user);
void knem_users_exit(void);

/* knem_copy.c */
long knem_ioctl_copy(struct knem_ctx *ctx, unsigned int cmd,
		     void __user *arg);
void knem_xfer_report(struct knem_xfer *xfer, int err, enum knem_engine eng);
void knem_xfer_release(struct knem_xfer *xfer);

/* knem_cpu.c */
int knem_offload_init(void);
void knem_offload_exit(void);
int knem_cpu_copy(struct knem_xfer *xfer);
int knem_xfer_stop(const struct knem_xfer *xfer);
void knem_offload_submit(struct knem_xfer *xfer, bool dma);
void knem_offload_cancel(struct knem_ctx *ctx);
int knem_bind_offload(struct knem_ctx *ctx, void __user *arg);

/* knem_dma.c */
int knem_dma_init(void);
void knem_dma_exit(void);
bool knem_dma_usable(void);
int knem_dma_copy(struct knem_xfer *xfer, bool killable);
void knem_dma_ctx_sync(struct knem_ctx *ctx);
bool knem_dma_refresh(void);
unsigned int knem_dma_nr_chans(void);
unsigned int knem_dma_table_size(void);
int knem_dma_chan_name(unsigned int slot, char *buf, size_t size);

/* knem_status.c */
int knem_status_mmap(struct knem_ctx *ctx, struct vm_area_struct *vma);
int knem_status_check(struct knem_ctx *ctx, u32 index);
void knem_status_set(struct knem_ctx *ctx, u32 index, knem_status_t value);
void knem_status_store(struct knem_ctx *ctx, u32 index, knem_status_t value);
int knem_notify_reserve(struct knem_ctx *ctx);
void knem_notify_unreserve(struct knem_ctx *ctx);
void knem_notify_push(struct knem_ctx *ctx, u32 index);
ssize_t knem_notify_read(struct knem_ctx *ctx, struct file *file,
			 char __user *buf, size_t count);
__poll_t knem_notify_poll(struct knem_ctx *ctx, struct file *file,
			  poll_table *wait);
void knem_notify_init(struct knem_ctx *ctx);
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
	KNEM_STAT_DMA_CPU_PIECES,
	KNEM_STAT_DMA_TIMEOUTS,
	KNEM_STAT_DMA_SPLIT,
	KNEM_STAT_NR
};
void knem_stat_add(enum knem_stat stat, u64 value);
void knem_stat_chan_add(unsigned int slot, u64 bytes);
void knem_pinned_add(long pages);
long knem_pinned_total(void);
ssize_t knem_stats_read(struct knem_ctx *ctx, char __user *buf, size_t count,
			loff_t *ppos);

#endif /* KNEM_PRIV_H */
