// SPDX-License-Identifier: GPL-2.0
/*
 * Regions: user iovec lists pinned at creation and published under an
 * unguessable cookie in one global table, so that any process opening
 * /dev/knem can name another process's buffer (subject to the uid check,
 * made against the euid of the task using the cookie, at that time).
 *
 * Lifetime: the table holds one reference to a linked region, every copy in
 * progress holds one more.  Unlinking (DESTROY_REGION, the first use of a
 * SINGLEUSE region, close of the owner's file) drops the table's reference;
 * pages are unpinned when the last reference goes, possibly after a copy in
 * flight on an offload worker or a DMA engine completes.
 *
 * The table is an rhashtable: lookups walk one short bucket under RCU
 * (kref_get_unless_zero), inserts and removals lock one bucket, and the
 * table grows with the number of regions, so neither the copy path nor
 * region creation takes a global lock.  Unpublishing is decided by one
 * atomic_cmpxchg() on region->linked: DESTROY_REGION, the consumption of a
 * SINGLEUSE region and the owner's close race for it and exactly one wins
 * the table's reference.
 */
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/random.h>
#include <linux/sched/mm.h>
#include <linux/backing-dev.h>
#include <linux/uaccess.h>
#include <linux/sched.h>

#include "knem_priv.h"
#include "knem_compat.h"

static struct rhashtable knem_regions;

static const struct rhashtable_params knem_regions_params = {
	.key_len = sizeof(knem_cookie_t),
	.key_offset = offsetof(struct knem_region, cookie),
	.head_offset = offsetof(struct knem_region, node),
	.automatic_shrinking = true,
};

int knem_regions_init(void)
{
	return rhashtable_init(&knem_regions, &knem_regions_params);
}

void knem_regions_exit(void)
{
	/* Every file is closed: the table is empty. */
	rhashtable_destroy(&knem_regions);
}

void knem_ctx_get(struct knem_ctx *ctx)
{
	kref_get(&ctx->kref);
}

static void knem_ctx_free(struct kref *kref)
{
	struct knem_ctx *ctx = container_of(kref, struct knem_ctx, kref);

	knem_status_free(ctx);
	free_cpumask_var(ctx->offload_cpus);
	kfree(ctx);
}

void knem_ctx_put(struct knem_ctx *ctx)
{
	kref_put(&ctx->kref, knem_ctx_free);
}

/* Bytes of a list of @total bytes that lie at or after @offset. */
u64 knem_bytes_after(u64 total, u64 offset)
{
	return offset < total ? total - offset : 0;
}

/*
 * Copy a user iovec array in and check it: the count against the module
 * limit, each range against the user address space, the sum for overflow.
 * A single iovec may exceed 2 GiB: regions of registration caches do.
 * Up to KNEM_FAST_IOVECS entries land in @fast (caller's stack).
 */
int knem_iovecs_import(u64 uptr, u32 nr, struct iovec *fast,
		       struct iovec **iovp, u64 *total)
{
	struct knem_cmd_param_iovec __user *uiov = u64_to_user_ptr(uptr);
	struct knem_cmd_param_iovec param;
	struct iovec *iov;
	u64 sum = 0;
	u32 i;

	if (nr > knem_max_iovecs)
		return -EINVAL;
	iov = fast;
	if (nr > KNEM_FAST_IOVECS)
		iov = kvmalloc_array(nr, sizeof(*iov), KNEM_GFP);
	if (!iov)
		return -ENOMEM;
	for (i = 0; i < nr; i++) {
		if (copy_from_user(&param, &uiov[i], sizeof(param)))
			goto fault;
		if (param.len && (param.base + param.len < param.base ||
				  !access_ok(u64_to_user_ptr(param.base),
					     param.len)))
			goto fault;
		if (sum + param.len < sum)
			goto inval;
		sum += param.len;
		iov[i].iov_base = u64_to_user_ptr(param.base);
		iov[i].iov_len = param.len;
	}
	*iovp = iov;
	*total = sum;
	return 0;
fault:
	knem_iovecs_free(iov, fast);
	return -EFAULT;
inval:
	knem_iovecs_free(iov, fast);
	return -EINVAL;
}

void knem_iovecs_free(struct iovec *iov, struct iovec *fast)
{
	if (iov != fast)
		kvfree(iov);
}

static unsigned long knem_iov_pages(const struct iovec *iov)
{
	unsigned long start = (unsigned long)iov->iov_base;
	unsigned long end = start + iov->iov_len - 1;

	return (end >> PAGE_SHIFT) - (start >> PAGE_SHIFT) + 1;
}

static void knem_ctx_pinned_add(struct knem_ctx *ctx, long nr)
{
	atomic_long_add(nr, &ctx->pinned_pages);
	knem_pinned_add(nr);
}

/*
 * Does a writable long-term pin of @vma need the filesystem's dirty
 * tracking?  The rule of Linux 6.5+ (writable_file_mapping_allowed()),
 * applied by knem on every kernel so that 6.1 refuses what 6.12 refuses:
 * shared file mappings written back by a filesystem cannot be pinned for
 * writing, anonymous, private, shmem and hugetlbfs mappings can.
 */
static bool knem_vma_needs_dirty_tracking(struct vm_area_struct *vma)
{
	const struct vm_operations_struct *ops = vma->vm_ops;

	if (!(vma->vm_flags & VM_SHARED))
		return false;
	if (ops && (ops->page_mkwrite || ops->pfn_mkwrite))
		return true;
	if (vma->vm_flags & VM_PFNMAP)
		return false;
	return vma->vm_file && vma->vm_file->f_mapping &&
	       mapping_can_writeback(vma->vm_file->f_mapping);
}

/* EFAULT, as gup itself on 6.5+, when a range is such a mapping. */
static int knem_check_writable(const struct iovec *iov, u32 nr)
{
	struct mm_struct *mm = current->mm;
	int err = 0;
	u32 i;

	mmap_read_lock(mm);
	for (i = 0; i < nr && !err; i++) {
		unsigned long start = (unsigned long)iov[i].iov_base;
		unsigned long end = start + iov[i].iov_len;
		struct vm_area_struct *vma;

		if (!iov[i].iov_len)
			continue;
		for (vma = find_vma(mm, start); vma && vma->vm_start < end;
		     vma = find_vma(mm, vma->vm_end)) {
			if (knem_vma_needs_dirty_tracking(vma)) {
				err = -EFAULT;
				break;
			}
		}
	}
	mmap_read_unlock(mm);
	return err;
}

/* Pin one user range into @pages; all or nothing. */
static int knem_pin_range(unsigned long start, unsigned long nr, bool writable,
			  struct page **pages)
{
	unsigned long done = 0;
	long ret;

	while (done < nr) {
		int chunk = min_t(unsigned long, nr - done, 1UL << 16);

		ret = knem_pin_user_range(start + done * PAGE_SIZE, chunk,
					  writable, pages + done);
		if (ret <= 0) {
			if (done)
				knem_unpin_pages(pages, done, false);
			return ret == -ENOMEM ? -ENOMEM : -EFAULT;
		}
		done += ret;
	}
	return 0;
}

static int knem_pin_segments(const struct iovec *iov, u32 nr,
			     struct knem_pinned *pin)
{
	unsigned long page = 0;
	unsigned int seg = 0;
	u32 i;
	int err;

	for (i = 0; i < nr; i++) {
		unsigned long start = (unsigned long)iov[i].iov_base;
		unsigned long npages;

		if (!iov[i].iov_len)
			continue;
		npages = knem_iov_pages(&iov[i]);
		err = knem_pin_range(start & PAGE_MASK, npages, pin->writable,
				     pin->pages + page);
		if (err) {
			if (page)
				knem_unpin_pages(pin->pages, page, false);
			return err;
		}
		pin->segs[seg].first_page = page;
		pin->segs[seg].offset = offset_in_page(start);
		pin->segs[seg].len = iov[i].iov_len;
		seg++;
		page += npages;
	}
	pin->nr_segs = seg;
	return 0;
}

/*
 * Pin, and pin again while @watch says the range changed meanwhile
 * (knem_watch.c); without a watch, once.
 */
static int knem_pin_checked(const struct iovec *iov, u32 nr,
			    struct knem_pinned *pin, unsigned long npages,
			    struct knem_watch *watch)
{
	unsigned long seq;
	int tries, err;

	for (tries = 0; ; tries++) {
		seq = knem_watch_begin(watch);
		err = knem_pin_segments(iov, nr, pin);
		if (err || knem_watch_arm(watch, seq, tries))
			return err;
		knem_unpin_pages(pin->pages, npages, false);
	}
}

/*
 * Pin the user iovec list at @uptr for the lifetime of @pin, charging the
 * pages to the calling user's locked_vm (RLIMIT_MEMLOCK, ENOMEM beyond it,
 * charged before the first page is pinned and held until the last one is
 * unpinned) and to @ctx's statistics.  Read-only or unmapped memory fails with EFAULT.
 * A @watch starts watching the list's range before anything is pinned
 * (knem_watch.c); the caller frees it, also on failure.
 */
int knem_pin_watched(struct knem_ctx *ctx, u64 uptr, u32 nr, bool writable,
		     struct knem_pinned *pin, struct knem_watch *watch)
{
	struct iovec fast[KNEM_FAST_IOVECS], *iov;
	unsigned long npages = 0;
	unsigned int nsegs = 0;
	u64 total;
	u32 i;
	int err;

	memset(pin, 0, sizeof(*pin));
	err = knem_iovecs_import(uptr, nr, fast, &iov, &total);
	if (err)
		return err;
	for (i = 0; i < nr; i++) {
		if (!iov[i].iov_len)
			continue;
		npages += knem_iov_pages(&iov[i]);
		nsegs++;
	}
	if (writable) {
		err = knem_check_writable(iov, nr);
		if (err)
			goto out_iov;
	}
	if (watch) {
		err = knem_watch_start(watch, iov, nr);
		if (err)
			goto out_iov;
	}
	err = knem_lock_charge(npages, &pin->locked);
	if (err)
		goto out_iov;
	err = -ENOMEM;
	pin->pages = kvmalloc_array(max_t(unsigned long, npages, 1),
				    sizeof(*pin->pages), KNEM_GFP);
	pin->segs = kvmalloc_array(max_t(unsigned int, nsegs, 1),
				   sizeof(*pin->segs), KNEM_GFP);
	if (!pin->pages || !pin->segs)
		goto out_free;
	pin->writable = writable;
	err = knem_pin_checked(iov, nr, pin, npages, watch);
	if (err)
		goto out_free;
	pin->nr_pages = npages;
	pin->length = total;
	pin->mm = current->mm;
	knem_mm_account(pin->mm, npages);
	pin->charged = ctx;
	knem_ctx_get(ctx);
	knem_ctx_pinned_add(ctx, npages);
	knem_iovecs_free(iov, fast);
	return 0;

out_free:
	kvfree(pin->pages);
	kvfree(pin->segs);
	pin->pages = NULL;
	pin->segs = NULL;
	knem_lock_uncharge(pin->locked, npages);
	pin->locked = NULL;
out_iov:
	knem_iovecs_free(iov, fast);
	return err;
}

int knem_pin_iovecs(struct knem_ctx *ctx, u64 uptr, u32 nr, bool writable,
		    struct knem_pinned *pin)
{
	return knem_pin_watched(ctx, uptr, nr, writable, pin, NULL);
}

void knem_unpin(struct knem_pinned *pin)
{
	if (!pin->charged)
		return;
	knem_unpin_pages(pin->pages, pin->nr_pages, pin->writable);
	knem_lock_uncharge(pin->locked, pin->nr_pages);
	knem_mm_unaccount(pin->mm, pin->nr_pages);
	knem_ctx_pinned_add(pin->charged, -(long)pin->nr_pages);
	knem_ctx_put(pin->charged);
	kvfree(pin->pages);
	kvfree(pin->segs);
	pin->charged = NULL;
}

struct knem_region *knem_region_alloc(struct knem_ctx *ctx, u32 flags,
				      u32 prot)
{
	struct knem_region *region;

	region = kzalloc(sizeof(*region), KNEM_GFP);
	if (!region)
		return NULL;
	kref_init(&region->kref);
	INIT_LIST_HEAD(&region->ctx_link);
	atomic_set(&region->linked, 0);
	region->owner = ctx;
	knem_ctx_get(ctx);
	region->uid = current_euid();
	region->flags = flags;
	region->prot = prot;
	return region;
}

static void knem_region_free(struct kref *kref)
{
	struct knem_region *region = container_of(kref, struct knem_region,
						  kref);

	/* Only published regions count; inline-copy pins never had a cookie. */
	if (region->cookie)
		knem_stat_add(KNEM_STAT_REGIONS_DESTROYED, 1);
	if (region->user)
		knem_user_uncharge(region->user);
	/* Set only if never published: creation failed, in process context. */
	knem_watch_free(region->watch);
	knem_unpin(&region->pin);
	knem_ctx_put(region->owner);
	kfree_rcu(region, rcu);
}

void knem_region_put(struct knem_region *region)
{
	kref_put(&region->kref, knem_region_free);
}

/*
 * After winning knem_region_unlink(), outside RCU: stop the invalidation
 * watch (it may sleep) while the table's reference still holds the owner.
 */
static void knem_region_unwatch(struct knem_region *region)
{
	knem_watch_free(region->watch);
	region->watch = NULL;
}

/*
 * Unpublish @region if nobody did yet.  Returns true when the caller won:
 * the table's reference is then the caller's to drop.
 */
static bool knem_region_unlink(struct knem_region *region)
{
	struct knem_ctx *owner = region->owner;

	if (atomic_cmpxchg(&region->linked, 1, 0) != 1)
		return false;
	rhashtable_remove_fast(&knem_regions, &region->node,
			       knem_regions_params);
	spin_lock(&owner->regions_lock);
	list_del_init(&region->ctx_link);
	owner->nr_regions--;
	spin_unlock(&owner->regions_lock);
	return true;
}

/*
 * Publish @region under a fresh random cookie, never 0 and never equal to
 * a live one.  It joins the owner's list first, so that whoever unlinks it
 * (a SINGLEUSE copy may, as soon as it is in the table) finds it there.
 */
static int knem_region_link(struct knem_ctx *ctx, struct knem_region *region)
{
	int err;

	spin_lock(&ctx->regions_lock);
	list_add(&region->ctx_link, &ctx->regions);
	ctx->nr_regions++;
	spin_unlock(&ctx->regions_lock);
	atomic_set(&region->linked, 1);
	do {
		do {
			region->cookie = get_random_u64();
		} while (!region->cookie);
		err = rhashtable_lookup_insert_fast(&knem_regions,
						    &region->node,
						    knem_regions_params);
	} while (err == -EEXIST);
	if (err)
		knem_region_unlink(region);
	return err;
}

/*
 * Create and publish a region.  KNEM_FLAG_INVALIDATE_STATUS (persistent
 * regions only) also watches the range and reports on slot @status_index
 * of @ctx's status array (knem_watch.c).
 */
int knem_region_create(struct knem_ctx *ctx, u64 iovecs, u32 nr, u32 flags,
		       u32 prot, u32 status_index, knem_cookie_t *cookie)
{
	struct knem_region *region;
	int err;

	if ((flags & ~(KNEM_FLAGS_ALL | KNEM_FLAG_INVALIDATE_STATUS)) ||
	    (prot & ~KNEM_PROT_ALL))
		return -EINVAL;
	if ((flags & KNEM_FLAG_INVALIDATE_STATUS) &&
	    (flags & KNEM_FLAG_SINGLEUSE))
		return -EINVAL;
	region = knem_region_alloc(ctx, flags, prot);
	if (!region)
		return -ENOMEM;
	region->user = knem_user_charge(region->uid);
	if (IS_ERR(region->user)) {
		err = PTR_ERR(region->user);
		region->user = NULL;
		goto out_put;
	}
	if (flags & KNEM_FLAG_INVALIDATE_STATUS) {
		region->watch = knem_watch_alloc(ctx, status_index);
		if (IS_ERR(region->watch)) {
			err = PTR_ERR(region->watch);
			region->watch = NULL;
			goto out_put;
		}
	}
	err = knem_pin_watched(ctx, iovecs, nr, prot & PROT_WRITE,
			       &region->pin, region->watch);
	if (err)
		goto out_put;
	err = knem_region_link(ctx, region);
	if (err) {
		region->cookie = 0;
		goto out_put;
	}
	knem_stat_add(KNEM_STAT_REGIONS_CREATED, 1);
	*cookie = region->cookie;
	return 0;

out_put:
	knem_region_put(region);
	return err;
}

int knem_region_destroy(struct knem_ctx *ctx, knem_cookie_t cookie)
{
	struct knem_region *region;
	bool won = false;

	rcu_read_lock();
	region = rhashtable_lookup(&knem_regions, &cookie,
				   knem_regions_params);
	if (region && region->owner == ctx)
		won = knem_region_unlink(region);
	rcu_read_unlock();
	if (!won)
		return -EINVAL;
	knem_region_unwatch(region);
	knem_region_put(region);
	return 0;
}

/*
 * May the current task use @region?  Its euid now must be the creator's,
 * unless the region has ANY_USER_ACCESS: EPERM otherwise.  Every use
 * checks it at that time (copy, attach, mmap of an attachment), so a
 * descriptor, an attachment or a cookie handed to another user, or kept
 * across setuid(), grants nothing.  uid and flags never change after
 * publication.
 */
int knem_region_access(const struct knem_region *region)
{
	if (uid_eq(region->uid, current_euid()) ||
	    (region->flags & KNEM_FLAG_ANY_USER_ACCESS))
		return 0;
	return -EPERM;
}

/*
 * Take a reference to the region named by @cookie for the current task.
 * Errors in the order clients expect: unknown cookie EINVAL, another euid
 * without ANY_USER_ACCESS EPERM, protection EACCES.  The euid is the
 * caller's now, not the opener's of the file (a process that drops
 * privileges loses access to root's regions at once).  A SINGLEUSE region
 * passing those checks is consumed by a copy (@consume): unlinked, its
 * table reference handed to the caller, so the next lookup fails with
 * EINVAL; without @consume it is EINVAL.
 */
static struct knem_region *knem_region_find(knem_cookie_t cookie,
					    u32 need_prot, bool consume)
{
	struct knem_region *region;
	int err = -EINVAL;

	rcu_read_lock();
	region = cookie ? rhashtable_lookup(&knem_regions, &cookie,
					    knem_regions_params) : NULL;
	if (!region)
		goto fail;
	err = knem_region_access(region);
	if (err)
		goto fail;
	err = -EACCES;
	if ((region->prot & need_prot) != need_prot)
		goto fail;
	err = -EINVAL;
	if (region->flags & KNEM_FLAG_SINGLEUSE) {
		/* Exactly one lookup wins the table's reference. */
		if (!consume || !knem_region_unlink(region))
			goto fail;
	} else if (!atomic_read(&region->linked) ||
		   !kref_get_unless_zero(&region->kref)) {
		goto fail;
	}
	rcu_read_unlock();
	return region;
fail:
	rcu_read_unlock();
	return ERR_PTR(err);
}

/* The region of a copy; consumes a SINGLEUSE region. */
struct knem_region *knem_region_lookup(knem_cookie_t cookie, u32 need_prot)
{
	return knem_region_find(cookie, need_prot, true);
}

/* The region of an attachment; SINGLEUSE regions are EINVAL. */
struct knem_region *knem_region_get(knem_cookie_t cookie, u32 need_prot)
{
	return knem_region_find(cookie, need_prot, false);
}

/* Close of the owner's file: unlink all its regions. */
void knem_regions_release(struct knem_ctx *ctx)
{
	struct knem_region *region;

	for (;;) {
		spin_lock(&ctx->regions_lock);
		region = list_first_entry_or_null(&ctx->regions,
						  struct knem_region, ctx_link);
		if (region)
			kref_get(&region->kref);
		spin_unlock(&ctx->regions_lock);
		if (!region)
			break;
		/* Losing means a SINGLEUSE copy is taking it off the list. */
		if (knem_region_unlink(region)) {
			knem_region_unwatch(region);
			knem_region_put(region);
		}
		knem_region_put(region);
		cond_resched();
	}
}

void knem_cursor_init(struct knem_cursor *cur, const struct knem_pinned *pin,
		      u64 offset, u64 length)
{
	cur->pin = pin;
	cur->seg = 0;
	while (cur->seg < pin->nr_segs && offset >= pin->segs[cur->seg].len) {
		offset -= pin->segs[cur->seg].len;
		cur->seg++;
	}
	cur->seg_off = offset;
	cur->left = length;
}

/*
 * Next piece of at most @max bytes that stays inside one page.  Returns
 * false when the walk is over.
 */
bool knem_cursor_next(struct knem_cursor *cur, u64 max, struct page **page,
		      unsigned int *offset, unsigned int *len)
{
	const struct knem_seg *seg;
	u64 pos, chunk;

	while (cur->left && cur->seg < cur->pin->nr_segs &&
	       cur->seg_off >= cur->pin->segs[cur->seg].len) {
		cur->seg++;
		cur->seg_off = 0;
	}
	if (!cur->left || cur->seg >= cur->pin->nr_segs)
		return false;
	seg = &cur->pin->segs[cur->seg];
	pos = seg->offset + cur->seg_off;
	*page = cur->pin->pages[seg->first_page + (pos >> PAGE_SHIFT)];
	*offset = offset_in_page(pos);
	chunk = min3(max, cur->left, seg->len - cur->seg_off);
	chunk = min_t(u64, chunk, PAGE_SIZE - *offset);
	*len = chunk;
	cur->seg_off += chunk;
	cur->left -= chunk;
	return true;
}
