// SPDX-License-Identifier: GPL-2.0
/*
 * Invalidation status (KNEM_FEATURE_INVALIDATE): a region created with
 * KNEM_FLAG_INVALIDATE_STATUS watches its creator's address range with an
 * mmu_interval_notifier and sets a status slot of the creator's file to
 * FAILED when the range may map other pages than the ones pinned.
 *
 * A region keeps the pages it pinned whatever the creator does with its
 * addresses: after munmap and mmap again, mremap or MADV_DONTNEED the same
 * addresses show new pages, and a copy from (or an attachment of) the
 * region reads the old ones.  A registration cache that reuses a region
 * for the next message from the same buffer address must know that, and
 * must know it without a system call per message: it polls the slot, as
 * it polls a copy's.
 *
 * The notifier is inserted before the pages are pinned and the slot is
 * armed after, the usual mmu_interval_read_begin() / read_retry() pairing
 * under the watch's lock: an invalidation between the two (the pin's own
 * faults make some: a read pin of an untouched page replaces the shared
 * zero page) means the pages may not be the range's, so they are pinned
 * again, and after KNEM_WATCH_TRIES the slot starts FAILED.  Once armed,
 * every invalidation fails the slot.  Changes of protection only
 * (mprotect, NUMA hinting, write-protection at fork, soft-dirty tracking)
 * keep the pages in place and leave the slot alone: pinned anonymous
 * pages stay the parent's at fork.  Everything else (unmap, zap, migration,
 * exit) fails the slot; a spurious FAILED only costs the cache a new
 * region.
 *
 * The notifier is removed when the region is unpublished, in process
 * context (it may wait for an invalidation in progress), before the
 * table's reference is dropped; the region holds its owner file, whose
 * status array the callback writes, until then.  The notifier holds the
 * mm_struct (mmgrab), so removal after the creator's exit_mmap() (exit
 * tears the mm down before it closes files) is fine.
 */
#include <linux/mmu_notifier.h>
#include <linux/slab.h>

#include "knem_priv.h"

#define KNEM_WATCH_TRIES	3

struct knem_watch {
	struct mmu_interval_notifier sub;
	struct knem_ctx *ctx;		/* the region's owner; holds the array */
	u32 index;			/* slot in ctx's status array */
	spinlock_t lock;		/* sub's seq against armed */
	bool armed;			/* the slot reports invalidations */
};

static bool knem_watch_invalidate(struct mmu_interval_notifier *sub,
				  const struct mmu_notifier_range *range,
				  unsigned long cur_seq)
{
	struct knem_watch *w = container_of(sub, struct knem_watch, sub);

	switch (range->event) {
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
	case MMU_NOTIFY_SOFT_DIRTY:
		return true;
	default:
		break;
	}
	/* No sleep here: non-blockable ranges are fine. */
	spin_lock(&w->lock);
	mmu_interval_set_seq(sub, cur_seq);
	if (w->armed)
		knem_status_store(w->ctx, w->index, KNEM_STATUS_FAILED);
	spin_unlock(&w->lock);
	return true;
}

static const struct mmu_interval_notifier_ops knem_watch_ops = {
	.invalidate = knem_watch_invalidate,
};

/* The smallest range that covers the non-empty iovecs; false if none. */
static bool knem_iovecs_hull(const struct iovec *iov, u32 nr,
			     unsigned long *start, unsigned long *len)
{
	unsigned long lo = ULONG_MAX, hi = 0;
	u32 i;

	for (i = 0; i < nr; i++) {
		unsigned long b = (unsigned long)iov[i].iov_base;

		if (!iov[i].iov_len)
			continue;
		lo = min(lo, b);
		hi = max(hi, b + (unsigned long)iov[i].iov_len);
	}
	if (hi <= lo)
		return false;
	*start = lo;
	*len = hi - lo;
	return true;
}

/*
 * Check @index against @ctx's status array (EINVAL without one or past
 * it) and make the watch; the slot is only written by knem_watch_start().
 */
struct knem_watch *knem_watch_alloc(struct knem_ctx *ctx, u32 index)
{
	struct knem_watch *w;
	int err;

	err = knem_status_check(ctx, index);
	if (err)
		return ERR_PTR(err);
	w = kzalloc(sizeof(*w), KNEM_GFP);
	if (!w)
		return ERR_PTR(-ENOMEM);
	w->ctx = ctx;
	w->index = index;
	spin_lock_init(&w->lock);
	return w;
}

/*
 * Start watching the iovecs' range in the current mm, before the pages
 * are pinned.  An empty list pins nothing that could change: nothing
 * watches it.
 */
int knem_watch_start(struct knem_watch *w, const struct iovec *iov, u32 nr)
{
	unsigned long start, len;
	int err;

	if (!knem_iovecs_hull(iov, nr, &start, &len))
		return 0;
	err = mmu_interval_notifier_insert(&w->sub, current->mm, start, len,
					   &knem_watch_ops);
	/* A failed insert may have set sub.mm without holding it. */
	if (err)
		w->sub.mm = NULL;
	return err;
}

/* Before a pin: the sequence knem_watch_arm() checks.  May sleep. */
unsigned long knem_watch_begin(struct knem_watch *w)
{
	if (!w || !w->sub.mm)
		return 0;
	return mmu_interval_read_begin(&w->sub);
}

/*
 * After a pin (try @tries, from 0): arm the slot, SUCCESS, unless the
 * range changed since knem_watch_begin() returned @seq; then return false
 * to have the pages pinned again, or, at the last try, arm it FAILED.
 */
bool knem_watch_arm(struct knem_watch *w, unsigned long seq, int tries)
{
	bool changed = false;

	if (!w)
		return true;
	spin_lock(&w->lock);
	if (w->sub.mm)
		changed = mmu_interval_read_retry(&w->sub, seq);
	if (changed && tries + 1 < KNEM_WATCH_TRIES) {
		spin_unlock(&w->lock);
		return false;
	}
	knem_status_set(w->ctx, w->index,
			changed ? KNEM_STATUS_FAILED : KNEM_STATUS_SUCCESS);
	w->armed = true;
	spin_unlock(&w->lock);
	return true;
}

/* Stop watching (may sleep) and free @w; NULL is fine. */
void knem_watch_free(struct knem_watch *w)
{
	if (!w)
		return;
	if (w->sub.mm)
		mmu_interval_notifier_remove(&w->sub);
	kfree(w);
}
