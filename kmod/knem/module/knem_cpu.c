// SPDX-License-Identifier: GPL-2.0
/*
 * CPU copy engine.  Pinned pages are reached through kmap_local_page() one
 * page at a time; an unpinned local buffer (synchronous copies without
 * PINLOCAL) is reached through an iov_iter, which keeps the caller's own
 * page faults and access checks in the usual user-copy helpers.
 *
 * Asynchronous copies (MEMCPYTHREAD, and DMATHREAD submissions) run on one
 * kthread_worker per file, created on first use and optionally bound with
 * BIND_OFFLOAD; seed 003 §3.4 places it on the receiver's core.
 */
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/sched.h>
#include <linux/uaccess.h>

#include "knem_priv.h"

static int knem_copy_pinned(struct knem_xfer *x)
{
	struct knem_cursor src, dst;
	struct page *spage, *dpage;
	unsigned int soff, slen, doff, dlen;

	knem_cursor_init(&src, &x->src->pin, x->src_off, x->length);
	knem_cursor_init(&dst, &x->dst->pin, x->dst_off, x->length);
	while (knem_cursor_next(&src, PAGE_SIZE, &spage, &soff, &slen)) {
		void *from = kmap_local_page(spage);
		unsigned int done = 0;

		while (done < slen &&
		       knem_cursor_next(&dst, slen - done, &dpage, &doff,
					&dlen)) {
			void *to = kmap_local_page(dpage);

			memcpy(to + doff, from + soff + done, dlen);
			kunmap_local(to);
			flush_dcache_page(dpage);
			done += dlen;
		}
		kunmap_local(from);
		if (done < slen)
			return -EIO;	/* lists shorter than x->length */
		cond_resched();
	}
	return 0;
}

static int knem_copy_user(struct knem_xfer *x)
{
	const struct knem_region *pinned = x->user_is_dst ? x->src : x->dst;
	u64 off = x->user_is_dst ? x->src_off : x->dst_off;
	struct knem_cursor cur;
	struct page *page;
	unsigned int poff, len;
	size_t done;

	knem_cursor_init(&cur, &pinned->pin, off, x->length);
	while (knem_cursor_next(&cur, PAGE_SIZE, &page, &poff, &len)) {
		if (x->user_is_dst)
			done = copy_page_to_iter(page, poff, len,
						 &x->user_iter);
		else
			done = copy_page_from_iter(page, poff, len,
						   &x->user_iter);
		if (done != len)
			return -EFAULT;
		cond_resched();
	}
	return 0;
}

/* Synchronous copy in the calling task. */
int knem_cpu_copy(struct knem_xfer *x)
{
	x->engine = KNEM_ENGINE_CPU;
	return x->has_user_iter ? knem_copy_user(x) : knem_copy_pinned(x);
}

static void knem_thread_work(struct kthread_work *work)
{
	struct knem_xfer *x = container_of(work, struct knem_xfer, work);
	int err;

	if (x->thread_dma) {
		/* DMATHREAD: the thread waits for the engine, not the caller. */
		err = knem_dma_copy(x, false);
	} else {
		x->engine = KNEM_ENGINE_THREAD;
		err = knem_copy_pinned(x);
	}
	knem_xfer_finish(x, err, x->engine);
}

static struct kthread_worker *knem_worker_get(struct knem_ctx *ctx)
{
	struct kthread_worker *worker;

	mutex_lock(&ctx->lock);
	worker = ctx->worker;
	if (!worker) {
		worker = kthread_create_worker(0, "knem/%d", ctx->tgid);
		if (IS_ERR(worker)) {
			worker = NULL;
		} else {
			if (ctx->offload_bound)
				set_cpus_allowed_ptr(worker->task,
						     ctx->offload_cpus);
			ctx->worker = worker;
		}
	}
	mutex_unlock(&ctx->lock);
	return worker;
}

/*
 * Queue @x on the file's kthread.  Returns -EINPROGRESS once the worker
 * owns @x; @dma selects a DMA copy waited for on the thread (DMATHREAD).
 */
int knem_thread_submit(struct knem_xfer *x, bool dma)
{
	struct kthread_worker *worker = knem_worker_get(x->ctx);

	if (!worker)
		return -ENOMEM;
	x->thread_dma = dma;
	kthread_init_work(&x->work, knem_thread_work);
	kthread_queue_work(worker, &x->work);
	return -EINPROGRESS;
}

void knem_thread_stop(struct knem_ctx *ctx)
{
	if (ctx->worker)
		kthread_destroy_worker(ctx->worker);
	ctx->worker = NULL;
}

static int knem_bind_mask(struct knem_cmd_bind_offload *bind,
			  struct cpumask *mask)
{
	unsigned long *bits;
	size_t bytes;

	switch (bind->flags) {
	case KNEM_BIND_FLAG_CUSTOM:
		if (!bind->mask_len || bind->mask_len > PAGE_SIZE)
			return -EINVAL;
		bytes = max_t(size_t, bind->mask_len, cpumask_size());
		bits = kzalloc(ALIGN(bytes, sizeof(long)), GFP_KERNEL);
		if (!bits)
			return -ENOMEM;
		/* A little-endian byte array is also a bitmap of longs. */
		if (copy_from_user(bits, u64_to_user_ptr(bind->mask_ptr),
				   bind->mask_len)) {
			kfree(bits);
			return -EFAULT;
		}
		cpumask_and(mask, to_cpumask(bits), cpu_online_mask);
		kfree(bits);
		break;
	case KNEM_BIND_FLAG_CURRENT:
		cpumask_and(mask, current->cpus_ptr, cpu_online_mask);
		break;
	case KNEM_BIND_FLAG_CURRENT_REVERSED:
		cpumask_andnot(mask, cpu_online_mask, current->cpus_ptr);
		break;
	default:
		return -EINVAL;
	}
	return cpumask_empty(mask) ? -EINVAL : 0;
}

/* BIND_OFFLOAD: where the file's kthread runs, now and once created. */
int knem_bind_offload(struct knem_ctx *ctx, void __user *arg)
{
	struct knem_cmd_bind_offload bind;
	cpumask_var_t mask;
	int err;

	if (copy_from_user(&bind, arg, sizeof(bind)))
		return -EFAULT;
	if (!zalloc_cpumask_var(&mask, GFP_KERNEL))
		return -ENOMEM;
	err = knem_bind_mask(&bind, mask);
	if (err)
		goto out;
	mutex_lock(&ctx->lock);
	cpumask_copy(ctx->offload_cpus, mask);
	ctx->offload_bound = true;
	if (ctx->worker)
		err = set_cpus_allowed_ptr(ctx->worker->task, mask);
	mutex_unlock(&ctx->lock);
out:
	free_cpumask_var(mask);
	return err;
}
