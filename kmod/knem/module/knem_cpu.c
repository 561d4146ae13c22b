// SPDX-License-Identifier: GPL-2.0
/*
 * CPU copy engine.  Pinned pages are reached through kmap_local_page() one
 * page at a time; an unpinned local buffer (synchronous copies without
 * PINLOCAL) is reached through an iov_iter, which keeps the caller's own
 * page faults and access checks in the usual user-copy helpers.
 *
 * Every copy loop stops between pages when it should (knem_xfer_stop()):
 * in the caller, at a fatal signal (-EINTR), so that kill -9 ends a copy
 * of gigabytes at once; on a worker, when the file is being closed
 * (-ECANCELED).  A stopped copy has copied a prefix and fails.
 *
 * Asynchronous copies (MEMCPYTHREAD, and the DMA copies waited for off
 * the caller: DMATHREAD and ASYNCDMACOMPLETE) run on two workqueues shared
 * by every file, not on a kernel thread per open file: an unbound one, and
 * a per-CPU one (WQ_CPU_INTENSIVE, so long copies do not stall the CPU's
 * other work items) for files placed with BIND_OFFLOAD, whose copies go to
 * the CPUs of their mask in turn, never to one their submitter may not run
 * on.  Buti, Goglin et al., "Cache-efficient,
 * intranode, large-message MPI communication with MPICH2-Nemesis" (2009)
 * place the copy on the receiver's core for its cache; the mask says where.
 *
 * A file's asynchronous copies run one at a time, in submission order, as
 * KNEM's per-file kernel thread runs them: each copy is a work item of its
 * own (on the CPU chosen at submission), and the one that finishes queues
 * the next after it has written its status and NOTIFY_FD index, so those
 * arrive in submission order.  Files still copy in parallel.  Close marks
 * the file closing: the copy in flight stops at its next page and each
 * queued one fails (status FAILED) without copying, so close waits for one
 * page of copying, or one DMA wait (dma_timeout_ms), not for the queue.
 */
#include <linux/highmem.h>
#include <linux/slab.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/uaccess.h>
#include <linux/workqueue.h>

#include "knem_priv.h"

/*
 * Should the copy @x stop now?  In the caller (a synchronous copy, on the
 * stack) at a fatal signal; on a worker once its file is closing.
 */
int knem_xfer_stop(const struct knem_xfer *x)
{
	if (!x->on_heap)
		return fatal_signal_pending(current) ? -EINTR : 0;
	return READ_ONCE(x->ctx->closing) ? -ECANCELED : 0;
}

static int knem_copy_pinned(struct knem_xfer *x)
{
	int err;

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
		err = knem_xfer_stop(x);
		if (err)
			return err;
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
	int err;

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
		err = knem_xfer_stop(x);
		if (err)
			return err;
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

static struct workqueue_struct *knem_wq_unbound;
static struct workqueue_struct *knem_wq_percpu;

int knem_offload_init(void)
{
	knem_wq_unbound = alloc_workqueue("knem_offload", WQ_UNBOUND, 0);
	if (!knem_wq_unbound)
		return -ENOMEM;
	knem_wq_percpu = alloc_workqueue("knem_offload_bound",
					 WQ_CPU_INTENSIVE, 0);
	if (!knem_wq_percpu) {
		destroy_workqueue(knem_wq_unbound);
		return -ENOMEM;
	}
	return 0;
}

/* Every file is closed, so every queued copy has finished. */
void knem_offload_exit(void)
{
	destroy_workqueue(knem_wq_percpu);
	destroy_workqueue(knem_wq_unbound);
}

static void knem_queue_work(struct knem_xfer *x)
{
	if (x->cpu < nr_cpu_ids)
		queue_work_on(x->cpu, knem_wq_percpu, &x->work);
	else
		queue_work(knem_wq_unbound, &x->work);
}

/* @x, the head of its file's queue, is done: start the next copy. */
static void knem_queue_next(struct knem_xfer *x)
{
	struct knem_ctx *ctx = x->ctx;
	struct knem_xfer *next;

	spin_lock(&ctx->queue_lock);
	list_del(&x->queued);
	next = list_first_entry_or_null(&ctx->queue, struct knem_xfer, queued);
	spin_unlock(&ctx->queue_lock);
	/* Only this work starts next: it stays allocated until it runs. */
	if (next)
		knem_queue_work(next);
}

static void knem_offload_work(struct work_struct *work)
{
	struct knem_xfer *x = container_of(work, struct knem_xfer, work);
	int err = knem_xfer_stop(x);

	if (err || !x->length) {
		x->engine = KNEM_ENGINE_THREAD;
	} else if (x->thread_dma) {
		/* The worker waits for the engine, not the caller. */
		err = knem_dma_copy(x, false);
	} else {
		x->engine = KNEM_ENGINE_THREAD;
		err = knem_copy_pinned(x);
	}
	/* Status and notification before the next copy may write its own. */
	knem_xfer_report(x, err, x->engine);
	knem_queue_next(x);
	knem_xfer_release(x);
}

/*
 * The next CPU of a bound file's mask that the submitting task may run on,
 * or the first CPU it may run on when the mask has none of them any more
 * (its affinity or its cpuset shrank since BIND_OFFLOAD): a bound copy
 * never runs where its submitter could not.  Called in the submitter's
 * context, so current->cpus_ptr is the submitter's.
 */
static unsigned int knem_offload_cpu(struct knem_ctx *ctx)
{
	const struct cpumask *allowed = current->cpus_ptr;
	unsigned int cpu, start;

	spin_lock(&ctx->offload_lock);
	start = ctx->offload_last < 0 ? 0 :
		(ctx->offload_last + 1) % nr_cpu_ids;
	for_each_cpu_wrap(cpu, ctx->offload_cpus, start) {
		if (cpu_online(cpu) && cpumask_test_cpu(cpu, allowed)) {
			ctx->offload_last = cpu;
			goto out;
		}
	}
	cpu = cpumask_first_and(allowed, cpu_online_mask);
out:
	spin_unlock(&ctx->offload_lock);
	return cpu;
}

/*
 * Queue @x behind its file's other copies; the work owns it from now on.
 * @dma selects a DMA copy waited for by the worker (DMATHREAD,
 * ASYNCDMACOMPLETE).  The CPU is chosen now, in the submitter's context.
 * Queueing cannot fail, so a copy reported PENDING always completes.
 */
void knem_offload_submit(struct knem_xfer *x, bool dma)
{
	struct knem_ctx *ctx = x->ctx;
	bool first;

	x->thread_dma = dma;
	x->cpu = nr_cpu_ids;
	INIT_WORK(&x->work, knem_offload_work);
	if (READ_ONCE(ctx->offload_bound))
		x->cpu = knem_offload_cpu(ctx);
	spin_lock(&ctx->queue_lock);
	first = list_empty(&ctx->queue);
	list_add_tail(&x->queued, &ctx->queue);
	spin_unlock(&ctx->queue_lock);
	if (first)
		knem_queue_work(x);
}

/* Close: the copy in flight stops, the queued ones fail without copying. */
void knem_offload_cancel(struct knem_ctx *ctx)
{
	WRITE_ONCE(ctx->closing, true);
}

/*
 * A CUSTOM mask: KNEM 1.1 reads at most a cpumask_t and takes a shorter
 * (even empty) one as the CPUs it names; so do we, up to our cpumask size.
 * A little-endian byte array is also a bitmap of longs.
 */
static int knem_read_mask(const struct knem_cmd_bind_offload *bind,
			  struct cpumask *mask)
{
	size_t len = min_t(size_t, bind->mask_len, cpumask_size());

	cpumask_clear(mask);
	if (len && copy_from_user(cpumask_bits(mask),
				  u64_to_user_ptr(bind->mask_ptr), len))
		return -EFAULT;
	return 0;
}

/*
 * The CPUs a bound file's copies run on: the requested ones that the
 * caller may run on itself and that are online.  Offloaded work must not
 * leave the caller's cpuset, but cpuset_cpus_allowed() is not exported to
 * modules: the caller's affinity (current->cpus_ptr), which its cpuset
 * bounds, stands for it.  It is narrower than the cpuset when the caller
 * pinned itself (CURRENT_REVERSED then has nothing left).  A request with
 * no such CPU is not an error, as in KNEM 1.1, whose thread stays unbound
 * when set_cpus_allowed_ptr() refuses its mask: it falls back to every
 * CPU the caller may run on.
 */
static int knem_bind_mask(const struct knem_cmd_bind_offload *bind,
			  struct cpumask *mask)
{
	const struct cpumask *allowed = current->cpus_ptr;
	int err = 0;

	switch (bind->flags) {
	case KNEM_BIND_FLAG_CUSTOM:
		err = knem_read_mask(bind, mask);
		break;
	case KNEM_BIND_FLAG_CURRENT:
		cpumask_copy(mask, allowed);
		break;
	case KNEM_BIND_FLAG_CURRENT_REVERSED:
		cpumask_andnot(mask, cpu_possible_mask, allowed);
		break;
	default:
		err = -EINVAL;
	}
	if (err)
		return err;
	cpumask_and(mask, mask, allowed);
	if (!cpumask_and(mask, mask, cpu_online_mask))
		cpumask_and(mask, allowed, cpu_online_mask);
	return 0;
}

/* BIND_OFFLOAD: the CPUs this file's offloaded copies run on from now. */
int knem_bind_offload(struct knem_ctx *ctx, void __user *arg)
{
	struct knem_cmd_bind_offload bind;
	cpumask_var_t mask;
	int err;

	if (copy_from_user(&bind, arg, sizeof(bind)))
		return -EFAULT;
	if (!zalloc_cpumask_var(&mask, KNEM_GFP))
		return -ENOMEM;
	err = knem_bind_mask(&bind, mask);
	if (err)
		goto out;
	spin_lock(&ctx->offload_lock);
	cpumask_copy(ctx->offload_cpus, mask);
	ctx->offload_last = -1;
	WRITE_ONCE(ctx->offload_bound, true);
	spin_unlock(&ctx->offload_lock);
out:
	free_cpumask_var(mask);
	return err;
}
