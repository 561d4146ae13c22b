// SPDX-License-Identifier: GPL-2.0
/*
 * The status array: one knem_status_t per slot, allocated by the driver
 * when the user maps the device at offset 0, so that asynchronous copies
 * report completion with a store the user polls.  One mapping per file;
 * its length (page-rounded) is the slot count.
 *
 * Up to max_status_slots bytes per file are the caller's memory: each page
 * comes from alloc_page(KNEM_GFP), charged to its memory cgroup (ENOMEM
 * over the limit, no OOM kill), and is mapped with vm_insert_pages().
 * vmalloc_user() would map as easily, but charges nobody.  The kernel
 * writes a slot through its page's linear address.
 *
 * NOTIFY_FD, as KNEM 1.1 defines it: completed slot indexes of flagged
 * asynchronous copies are also queued on the file, in a ring of as many
 * entries as there are status slots (allocated at the first NOTIFY_FD
 * copy).  A submission reserves its entry first and fails with EBUSY when
 * the ring is full, so a completion always finds room.  read() of N bytes
 * (a multiple of 4, else EINVAL) blocks until N / 4 indexes are queued and
 * returns them all at once; with O_NONBLOCK it returns what is queued, or
 * EAGAIN.  Readers are serialized, so concurrent readers never see a
 * short or empty read.  poll() reports POLLIN while an index is queued and
 * POLLERR while no status array is mapped.
 */
#include <linux/mm.h>
#include <linux/uaccess.h>
#include <linux/fs.h>
#include <linux/slab.h>

#include "knem_priv.h"
#include "knem_compat.h"

static void knem_status_pages_free(struct page **pages, unsigned long nr)
{
	unsigned long i;

	for (i = 0; i < nr; i++)
		__free_page(pages[i]);
	kvfree(pages);
}

/* @nr zeroed pages (every slot PENDING), charged to the caller. */
static struct page **knem_status_pages_alloc(unsigned long nr)
{
	struct page **pages;
	unsigned long i;

	pages = kvmalloc_array(nr, sizeof(*pages), KNEM_GFP);
	if (!pages)
		return NULL;
	for (i = 0; i < nr; i++) {
		pages[i] = alloc_page(KNEM_GFP | __GFP_ZERO);
		if (!pages[i]) {
			knem_status_pages_free(pages, i);
			return NULL;
		}
	}
	return pages;
}

int knem_status_mmap(struct knem_ctx *ctx, struct vm_area_struct *vma)
{
	unsigned long size = vma->vm_end - vma->vm_start;
	unsigned long nr = size >> PAGE_SHIFT, left = nr;
	struct page **pages;
	int err;

	if (vma->vm_pgoff || !(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if ((u64)size > (1ULL << 32) / sizeof(knem_status_t))
		return -EINVAL;
	if (size > knem_max_status_slots * sizeof(knem_status_t))
		return -ENOMEM;

	mutex_lock(&ctx->lock);
	err = -EBUSY;
	if (ctx->status_pages)
		goto out;
	err = -ENOMEM;
	pages = knem_status_pages_alloc(nr);
	if (!pages)
		goto out;
	knem_vma_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	/* The mapping takes its own page references. */
	err = vm_insert_pages(vma, vma->vm_start, pages, &left);
	if (err) {
		/* mmap fails: the caller unmaps what was inserted. */
		knem_status_pages_free(pages, nr);
		goto out;
	}
	ctx->status_slots = size / sizeof(knem_status_t);
	ctx->status_nr_pages = nr;
	/* Pairs with the acquire in knem_status_check(). */
	smp_store_release(&ctx->status_pages, pages);
out:
	mutex_unlock(&ctx->lock);
	return err;
}

int knem_status_check(struct knem_ctx *ctx, u32 index)
{
	/* Pairs with the release in knem_status_mmap(): slots is set. */
	if (!smp_load_acquire(&ctx->status_pages) ||
	    index >= ctx->status_slots)
		return -EINVAL;
	return 0;
}

/* Write slot @index (checked by knem_status_check()); any context. */
void knem_status_store(struct knem_ctx *ctx, u32 index, knem_status_t value)
{
	unsigned long byte = (unsigned long)index * sizeof(knem_status_t);
	knem_status_t *page = page_address(ctx->status_pages[byte >>
							    PAGE_SHIFT]);

	WRITE_ONCE(page[offset_in_page(byte) / sizeof(knem_status_t)], value);
}

void knem_status_set(struct knem_ctx *ctx, u32 index, knem_status_t value)
{
	/* The data written before must be visible before the status. */
	smp_wmb();
	knem_status_store(ctx, index, value);
}

void knem_status_free(struct knem_ctx *ctx)
{
	if (ctx->status_pages)
		knem_status_pages_free(ctx->status_pages,
				       ctx->status_nr_pages);
	kvfree(ctx->notify_ring);
}

void knem_notify_init(struct knem_ctx *ctx)
{
	spin_lock_init(&ctx->notify_lock);
	mutex_init(&ctx->notify_read_lock);
	init_waitqueue_head(&ctx->notify_wq);
	atomic_long_set(&ctx->notify_reserved, 0);
}

/* The ring, allocated on first use: read-only users never pay for it. */
static int knem_notify_ring(struct knem_ctx *ctx)
{
	u32 *ring;
	int err = 0;

	/* Pairs with the release below: a ring seen is a ring allocated. */
	if (smp_load_acquire(&ctx->notify_ring))
		return 0;
	mutex_lock(&ctx->lock);
	if (!ctx->notify_ring) {
		ring = kvmalloc_array(ctx->status_slots, sizeof(*ring),
				      KNEM_GFP);
		if (!ring)
			err = -ENOMEM;
		/* Pairs with the acquire above (NULL is stored harmlessly). */
		smp_store_release(&ctx->notify_ring, ring);
	}
	mutex_unlock(&ctx->lock);
	return err;
}

/*
 * Promise a ring entry to a NOTIFY_FD copy about to start.  The caller
 * checked that the status array exists.  EBUSY when every entry is queued
 * or promised.
 */
int knem_notify_reserve(struct knem_ctx *ctx)
{
	int err = knem_notify_ring(ctx);

	if (err)
		return err;
	if (atomic_long_inc_return(&ctx->notify_reserved) >
	    (long)ctx->status_slots) {
		atomic_long_dec(&ctx->notify_reserved);
		return -EBUSY;
	}
	return 0;
}

void knem_notify_unreserve(struct knem_ctx *ctx)
{
	atomic_long_dec(&ctx->notify_reserved);
}

void knem_notify_push(struct knem_ctx *ctx, u32 index)
{
	unsigned long flags, tail;

	spin_lock_irqsave(&ctx->notify_lock, flags);
	tail = (ctx->notify_head + ctx->notify_queued) % ctx->status_slots;
	ctx->notify_ring[tail] = index;
	ctx->notify_queued++;
	spin_unlock_irqrestore(&ctx->notify_lock, flags);
	wake_up_interruptible_poll(&ctx->notify_wq, EPOLLIN | EPOLLRDNORM);
}

static unsigned long knem_notify_queued(struct knem_ctx *ctx)
{
	unsigned long queued;

	spin_lock_irq(&ctx->notify_lock);
	queued = ctx->notify_queued;
	spin_unlock_irq(&ctx->notify_lock);
	return queued;
}

/*
 * Copy @n queued indexes out and drop them from the ring.  The caller
 * holds notify_read_lock: entries [head, head + n) stay put meanwhile,
 * since completions only write after the queued ones.
 */
static ssize_t knem_notify_take(struct knem_ctx *ctx, char __user *buf,
				unsigned long n)
{
	unsigned long head = ctx->notify_head, first;

	first = min(n, ctx->status_slots - head);
	if (copy_to_user(buf, ctx->notify_ring + head, first * sizeof(u32)) ||
	    copy_to_user(buf + first * sizeof(u32), ctx->notify_ring,
			 (n - first) * sizeof(u32)))
		return -EFAULT;
	spin_lock_irq(&ctx->notify_lock);
	ctx->notify_head = (head + n) % ctx->status_slots;
	ctx->notify_queued -= n;
	spin_unlock_irq(&ctx->notify_lock);
	atomic_long_sub(n, &ctx->notify_reserved);
	return n * sizeof(u32);
}

ssize_t knem_notify_read(struct knem_ctx *ctx, struct file *file,
			 char __user *buf, size_t count)
{
	bool nonblock = file->f_flags & O_NONBLOCK;
	unsigned long want, avail;
	ssize_t ret;

	if (count % sizeof(u32))
		return -EINVAL;
	/* Pairs with knem_status_mmap(): status_slots is valid after it. */
	if (!smp_load_acquire(&ctx->status_pages))
		return -EINVAL;
	if (!count)
		return 0;
	/* More than the ring holds could never be satisfied. */
	want = min_t(unsigned long, count / sizeof(u32), ctx->status_slots);
	for (;;) {
		if (!nonblock && wait_event_interruptible(ctx->notify_wq,
				knem_notify_queued(ctx) >= want))
			return -ERESTARTSYS;
		if (mutex_lock_interruptible(&ctx->notify_read_lock))
			return -ERESTARTSYS;
		avail = knem_notify_queued(ctx);
		if (nonblock && !avail) {
			ret = -EAGAIN;
			break;
		}
		if (nonblock || avail >= want) {
			ret = knem_notify_take(ctx, buf, min(avail, want));
			break;
		}
		/* Another reader took them first: wait again. */
		mutex_unlock(&ctx->notify_read_lock);
	}
	mutex_unlock(&ctx->notify_read_lock);
	return ret;
}

__poll_t knem_notify_poll(struct knem_ctx *ctx, struct file *file,
			  poll_table *wait)
{
	poll_wait(file, &ctx->notify_wq, wait);
	/* Pairs with the release in knem_status_mmap(). */
	if (!smp_load_acquire(&ctx->status_pages))
		return EPOLLERR;
	return knem_notify_queued(ctx) ? EPOLLIN | EPOLLRDNORM : 0;
}
