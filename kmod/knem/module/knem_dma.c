// SPDX-License-Identifier: GPL-2.0
/*
 * DMA copy engine over the generic dmaengine API: any provider with the
 * DMA_MEMCPY capability (I/OAT, DSA, the test-only softdma) will do.
 *
 * knem is a dmaengine client of the public memcpy channels (dmaengine_get()
 * at load, dma_find_channel() per copy): channels registered after knem
 * loaded become usable immediately, and their providers stay loaded as
 * long as knem is.
 *
 * Both sides of a DMA copy are pinned.  Each physically contiguous run is
 * mapped for the channel's device and becomes one memcpy descriptor; a run
 * the device cannot copy (is_dma_copy_aligned() false) is copied by the
 * CPU instead.  A copy is always waited for by a task: the caller
 * (synchronous DMA, killable) or an offload worker (DMATHREAD and
 * ASYNCDMACOMPLETE), and its status is written by the CPU afterwards.
 *
 * Every descriptor reports its own result: dmaengine does not promise that
 * a channel halts after an error, so one failed descriptor among many
 * fails the copy even when the last one succeeded, and no status the
 * engine wrote could be taken back - hence no engine-written status.
 * The wait has a timeout (dma_timeout_ms): a stalled channel is stopped
 * with dmaengine_terminate_sync() before any page is unmapped or unpinned,
 * and the copy fails.
 *
 * If the engine cannot take a descriptor, what was submitted is waited for
 * and the whole copy is redone by the CPU (counted as a DMA fallback).
 */
#include <linux/dmaengine.h>
#include <linux/dma-mapping.h>
#include <linux/vmalloc.h>
#include <linux/slab.h>
#include <linux/highmem.h>

#include "knem_priv.h"

struct knem_dma_ent {
	dma_addr_t addr;
	u32 len;
	enum dma_data_direction dir;
};

struct knem_dma_map {
	struct dma_chan *chan;
	struct device *dev;
	unsigned int nr;	/* mapped entries: (source, destination) pairs */
	unsigned int max;
	atomic_t pending;	/* submitted and not completed, +1 meanwhile */
	atomic_t failed;	/* some descriptor reported an error */
	struct completion done;
	struct knem_dma_ent ent[];
};

static bool knem_dma_client;

int knem_dma_init(void)
{
	if (knem_dma_enable) {
		dmaengine_get();
		knem_dma_client = true;
	}
	return 0;
}

void knem_dma_exit(void)
{
	if (knem_dma_client)
		dmaengine_put();
}

bool knem_dma_usable(void)
{
	return knem_dma_client && dma_find_channel(DMA_MEMCPY);
}

/* Remember @chan so that release can wait for its callbacks to finish. */
static bool knem_dma_track(struct knem_ctx *ctx, struct dma_chan *chan)
{
	bool ok = false;
	int i;

	spin_lock(&ctx->dma_chans_lock);
	for (i = 0; i < KNEM_MAX_DMA_CHANS; i++) {
		if (!ctx->dma_chans[i])
			ctx->dma_chans[i] = chan;
		if (ctx->dma_chans[i] == chan) {
			ok = true;
			break;
		}
	}
	spin_unlock(&ctx->dma_chans_lock);
	return ok;
}

void knem_dma_ctx_sync(struct knem_ctx *ctx)
{
	int i;

	for (i = 0; i < KNEM_MAX_DMA_CHANS && ctx->dma_chans[i]; i++)
		dmaengine_synchronize(ctx->dma_chans[i]);
}

static int knem_dma_map_one(struct knem_dma_map *map, struct page *page,
			    unsigned int off, unsigned int len,
			    enum dma_data_direction dir)
{
	struct knem_dma_ent *e = &map->ent[map->nr];

	if (map->nr >= map->max)
		return -ENOSPC;
	e->addr = dma_map_page(map->dev, page, off, len, dir);
	if (dma_mapping_error(map->dev, e->addr))
		return -ENOMEM;
	e->len = len;
	e->dir = dir;
	map->nr++;
	return 0;
}

static void knem_dma_unmap(struct knem_dma_map *map)
{
	unsigned int i;

	for (i = 0; i < map->nr; i++)
		dma_unmap_page(map->dev, map->ent[i].addr, map->ent[i].len,
			       map->ent[i].dir);
	kvfree(map);
}

/* Upper bound of page-bounded pieces: each list adds a piece per page
 * touched plus partial pages at segment edges.
 */
static unsigned int knem_dma_pieces(const struct knem_xfer *x)
{
	u64 pages = DIV_ROUND_UP(x->length, PAGE_SIZE);

	return 2 * (pages + x->src->pin.nr_segs + x->dst->pin.nr_segs);
}

/* A run of bytes contiguous in physical memory on both sides. */
struct knem_dma_run {
	struct page *spage;
	struct page *dpage;
	unsigned int soff;
	unsigned int doff;
	u32 len;
};

/* The CPU copies a run the device cannot: both sides are contiguous. */
static void knem_dma_run_by_cpu(const struct knem_dma_run *run)
{
	size_t soff = run->soff, doff = run->doff, left = run->len;

	while (left) {
		size_t so = offset_in_page(soff), dof = offset_in_page(doff);
		size_t n = min3(left, PAGE_SIZE - so, PAGE_SIZE - dof);

		memcpy_page(nth_page(run->dpage, doff >> PAGE_SHIFT), dof,
			    nth_page(run->spage, soff >> PAGE_SHIFT), so, n);
		soff += n;
		doff += n;
		left -= n;
	}
	knem_stat_add(KNEM_STAT_DMA_CPU_PIECES, 1);
}

static int knem_dma_run_flush(struct knem_dma_map *map,
			      struct knem_dma_run *run)
{
	int err;

	if (!run->len)
		return 0;
	if (!is_dma_copy_aligned(map->chan->device, run->soff, run->doff,
				 run->len)) {
		knem_dma_run_by_cpu(run);
		run->len = 0;
		return 0;
	}
	err = knem_dma_map_one(map, run->spage, run->soff, run->len,
			       DMA_TO_DEVICE);
	if (!err)
		err = knem_dma_map_one(map, run->dpage, run->doff, run->len,
				       DMA_FROM_DEVICE);
	run->len = 0;
	return err;
}

/*
 * Add a piece to the current run when it continues it physically on both
 * sides (huge pages, or neighbouring frames), so that one descriptor
 * moves up to the device's segment size instead of one page.
 */
static int knem_dma_run_add(struct knem_dma_map *map, struct knem_dma_run *run,
			    struct page *spage, unsigned int soff,
			    struct page *dpage, unsigned int doff,
			    unsigned int len)
{
	int err;

	if (run->len &&
	    page_to_phys(spage) + soff ==
		page_to_phys(run->spage) + run->soff + run->len &&
	    page_to_phys(dpage) + doff ==
		page_to_phys(run->dpage) + run->doff + run->len &&
	    run->len + len <= dma_get_max_seg_size(map->dev)) {
		run->len += len;
		return 0;
	}
	err = knem_dma_run_flush(map, run);
	if (err)
		return err;
	*run = (struct knem_dma_run){ spage, dpage, soff, doff, len };
	return 0;
}

/* Map every (source, destination) run of the copy, in order. */
static int knem_dma_map_data(struct knem_xfer *x, struct knem_dma_map *map)
{
	struct knem_dma_run run = { .len = 0 };
	struct knem_cursor src, dst;
	struct page *spage, *dpage;
	unsigned int soff, slen, doff, dlen;
	int err;

	knem_cursor_init(&src, &x->src->pin, x->src_off, x->length);
	knem_cursor_init(&dst, &x->dst->pin, x->dst_off, x->length);
	while (knem_cursor_next(&src, PAGE_SIZE, &spage, &soff, &slen)) {
		unsigned int done = 0;

		while (done < slen &&
		       knem_cursor_next(&dst, slen - done, &dpage, &doff,
					&dlen)) {
			err = knem_dma_run_add(map, &run, spage, soff + done,
					       dpage, doff, dlen);
			if (err)
				return err;
			done += dlen;
		}
		if (done < slen)
			return -EIO;
	}
	return knem_dma_run_flush(map, &run);
}

/* Called once per descriptor, possibly in softirq context. */
static void knem_dma_desc_done(void *param,
			       const struct dmaengine_result *result)
{
	struct knem_dma_map *map = param;

	if (result && result->result != DMA_TRANS_NOERROR)
		atomic_set(&map->failed, 1);
	if (atomic_dec_and_test(&map->pending))
		complete(&map->done);
}

/*
 * Submit one descriptor per mapped pair, each with its own callback, and
 * start the channel.  On error the descriptors already submitted run on
 * and are waited for as usual.
 */
static int knem_dma_submit(struct knem_dma_map *map)
{
	struct dma_async_tx_descriptor *tx;
	unsigned int i;
	int err = 0;

	atomic_set(&map->pending, 1);
	atomic_set(&map->failed, 0);
	init_completion(&map->done);
	for (i = 0; i < map->nr / 2; i++) {
		tx = dmaengine_prep_dma_memcpy(map->chan,
					       map->ent[2 * i + 1].addr,
					       map->ent[2 * i].addr,
					       map->ent[2 * i].len,
					       DMA_CTRL_ACK | DMA_PREP_INTERRUPT);
		if (!tx) {
			err = -EBUSY;
			break;
		}
		tx->callback_result = knem_dma_desc_done;
		tx->callback_param = map;
		atomic_inc(&map->pending);
		if (dma_submit_error(dmaengine_submit(tx))) {
			atomic_dec(&map->pending);
			err = -EBUSY;
			break;
		}
	}
	if (i)
		dma_async_issue_pending(map->chan);
	if (atomic_dec_and_test(&map->pending))
		complete(&map->done);
	return err;
}

/*
 * Wait for the submitted descriptors: 0, -EIO when one failed, or, after
 * the timeout or a fatal signal, -ETIMEDOUT / -EINTR once the channel is
 * stopped.  A provider that cannot be stopped is waited for without limit:
 * its pages must stay pinned while it may write them.
 */
static int knem_dma_wait(struct knem_dma_map *map, bool killable)
{
	unsigned long timeout = msecs_to_jiffies(READ_ONCE(knem_dma_timeout_ms));
	long left;
	int err;

	if (killable)
		left = wait_for_completion_killable_timeout(&map->done,
							    timeout);
	else
		left = wait_for_completion_timeout(&map->done, timeout);
	if (left > 0)
		return atomic_read(&map->failed) ? -EIO : 0;
	err = left < 0 ? -EINTR : -ETIMEDOUT;
	knem_stat_add(KNEM_STAT_DMA_TIMEOUTS, 1);
	pr_warn_ratelimited("knem: DMA copy on %s %s, terminating the channel\n",
			    dma_chan_name(map->chan),
			    err == -EINTR ? "interrupted" : "timed out");
	if (dmaengine_terminate_sync(map->chan))
		wait_for_completion(&map->done);
	return err;
}

/* The whole copy by the CPU, in the caller or on a worker. */
static int knem_dma_by_cpu(struct knem_xfer *x)
{
	int err;

	knem_stat_add(KNEM_STAT_DMA_FALLBACKS, 1);
	err = knem_cpu_copy(x);
	if (x->thread_dma)
		x->engine = KNEM_ENGINE_THREAD;
	return err;
}

/*
 * Copy @x, both sides pinned, with a DMA channel, and wait for it: in the
 * caller (@killable) or on a worker.  Returns 0 when the data is there,
 * an error when the copy failed; either way no descriptor is left running.
 */
int knem_dma_copy(struct knem_xfer *x, bool killable)
{
	struct dma_chan *chan = dma_find_channel(DMA_MEMCPY);
	struct knem_dma_map *map;
	unsigned int max;
	int err, werr;

	x->engine = KNEM_ENGINE_DMA;
	if (!chan || !knem_dma_track(x->ctx, chan))
		return knem_dma_by_cpu(x);
	max = knem_dma_pieces(x) * 2;
	map = kvzalloc(struct_size(map, ent, max),
		       GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!map)
		return knem_dma_by_cpu(x);
	map->chan = chan;
	map->dev = chan->device->dev;
	map->max = max;

	err = knem_dma_map_data(x, map);
	if (err) {
		knem_dma_unmap(map);
		return knem_dma_by_cpu(x);
	}
	err = knem_dma_submit(map);
	werr = knem_dma_wait(map, killable);
	knem_dma_unmap(map);
	if (werr)
		return werr;
	/* The engine refused part of it: the CPU redoes the whole copy. */
	return err ? knem_dma_by_cpu(x) : 0;
}
