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
 * Both sides of a DMA copy are pinned.  Each page-bounded piece is mapped
 * for the channel's device and becomes one memcpy descriptor.  Completion:
 *  - synchronous (and DMATHREAD): the last descriptor interrupts, the
 *    caller (or the kthread) sleeps until then;
 *  - ASYNCDMACOMPLETE (seed 003 §3.4): after the data, fenced, one more
 *    1-byte descriptor copies KNEM_STATUS_SUCCESS from a kernel page into
 *    the user's status slot, so the engine itself reports completion and
 *    the CPU only comes back to unmap and unpin.
 * If the engine cannot take a descriptor, what was submitted is waited for
 * and the whole copy is redone by the CPU (counted as a DMA fallback).
 *
 * Errors: the final descriptor's result decides.  Engines halt on an error
 * and abort what follows (I/OAT does; softdma imitates it), so a failed
 * piece also fails the final descriptor and the chained status write
 * never happens.
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
	unsigned int nr;	/* mapped entries: data pairs, then status */
	unsigned int max;
	struct completion done;
	enum dmaengine_tx_result result;
	struct knem_dma_ent ent[];
};

static struct page *knem_success_page;
static struct workqueue_struct *knem_dma_wq;
static bool knem_dma_client;

int knem_dma_init(void)
{
	knem_dma_wq = alloc_workqueue("knem_dma", WQ_UNBOUND, 0);
	if (!knem_dma_wq)
		return -ENOMEM;
	knem_success_page = alloc_page(GFP_KERNEL | __GFP_ZERO);
	if (!knem_success_page) {
		destroy_workqueue(knem_dma_wq);
		return -ENOMEM;
	}
	*(knem_status_t *)page_address(knem_success_page) =
		KNEM_STATUS_SUCCESS;
	if (knem_dma_enable) {
		dmaengine_get();
		knem_dma_client = true;
	}
	return 0;
}

void knem_dma_exit(void)
{
	destroy_workqueue(knem_dma_wq);
	if (knem_dma_client)
		dmaengine_put();
	__free_page(knem_success_page);
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

	return 2 * (pages + x->src->pin.nr_segs + x->dst->pin.nr_segs) + 2;
}

/* A run of bytes contiguous in physical memory on both sides. */
struct knem_dma_run {
	struct page *spage;
	struct page *dpage;
	unsigned int soff;
	unsigned int doff;
	u32 len;
};

static int knem_dma_run_flush(struct knem_dma_map *map,
			      struct knem_dma_run *run)
{
	int err;

	if (!run->len)
		return 0;
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

static int knem_dma_map_status(struct knem_xfer *x, struct knem_dma_map *map)
{
	void *slot = x->ctx->status + x->status_index;
	int err;

	err = knem_dma_map_one(map, knem_success_page, 0, 1, DMA_TO_DEVICE);
	if (err)
		return err;
	return knem_dma_map_one(map, vmalloc_to_page(slot),
				offset_in_page(slot), 1, DMA_FROM_DEVICE);
}

static void knem_dma_sync_done(void *param,
			       const struct dmaengine_result *result)
{
	struct knem_dma_map *map = param;

	map->result = result ? result->result : DMA_TRANS_NOERROR;
	complete(&map->done);
}

static void knem_dma_async_work(struct work_struct *work)
{
	struct knem_xfer *x = container_of(work, struct knem_xfer, done_work);
	int err = x->map->result == DMA_TRANS_NOERROR ? 0 : -EIO;

	knem_dma_unmap(x->map);
	x->map = NULL;
	x->status_by_dma = true;
	knem_xfer_finish(x, err, KNEM_ENGINE_DMA);
}

/* May run in softirq context (hardware providers): defer the unpinning. */
static void knem_dma_async_done(void *param,
				const struct dmaengine_result *result)
{
	struct knem_xfer *x = param;

	x->map->result = result ? result->result : DMA_TRANS_NOERROR;
	queue_work(knem_dma_wq, &x->done_work);
}

/*
 * Submit descriptors for the mapped pairs (and the status pair when
 * @chain).  Returns 0 once the final descriptor is submitted; otherwise
 * the cookie of the last submitted one is left in *last (or 0).
 */
static int knem_dma_submit(struct knem_xfer *x, struct knem_dma_map *map,
			   unsigned int pairs, bool chain, dma_cookie_t *last)
{
	struct dma_async_tx_descriptor *tx;
	unsigned int i;
	unsigned int data = chain ? pairs - 1 : pairs;

	*last = 0;
	for (i = 0; i < pairs; i++) {
		unsigned long flags = DMA_CTRL_ACK;
		bool final = i == pairs - 1;
		dma_cookie_t cookie;

		/* The status byte must not land before the data. */
		if (chain && i == data - 1)
			flags |= DMA_PREP_FENCE;
		if (final)
			flags |= DMA_PREP_INTERRUPT;
		tx = dmaengine_prep_dma_memcpy(map->chan,
					       map->ent[2 * i + 1].addr,
					       map->ent[2 * i].addr,
					       map->ent[2 * i].len, flags);
		if (!tx)
			return -EBUSY;
		if (final) {
			tx->callback_result = chain ? knem_dma_async_done :
						      knem_dma_sync_done;
			tx->callback_param = chain ? (void *)x : (void *)map;
		}
		cookie = dmaengine_submit(tx);
		if (dma_submit_error(cookie))
			return -EBUSY;
		*last = cookie;
	}
	return 0;
}

/* The whole copy by the CPU, in the caller or on the kthread. */
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
 * The engine refused part of the copy: wait for what it accepted (only the
 * final descriptor has a callback, and it was not submitted), then redo
 * everything on the CPU.
 */
static int knem_dma_fallback(struct knem_xfer *x, struct knem_dma_map *map,
			     dma_cookie_t last)
{
	if (last) {
		dma_async_issue_pending(map->chan);
		dma_sync_wait(map->chan, last);
	}
	knem_dma_unmap(map);
	x->map = NULL;
	return knem_dma_by_cpu(x);
}

/*
 * Copy @x, both sides pinned, with a DMA channel.  With @chain the call
 * returns -EINPROGRESS and completion is reported by the engine (the
 * caller set the slot PENDING and holds the in-flight count); otherwise
 * it returns when the data is there.  Any other return means the copy is
 * over and was done in place.
 */
int knem_dma_copy(struct knem_xfer *x, bool chain)
{
	struct dma_chan *chan = dma_find_channel(DMA_MEMCPY);
	struct knem_dma_map *map;
	unsigned int pairs, max;
	dma_cookie_t last;
	int err;

	x->engine = KNEM_ENGINE_DMA;
	if (!chan || !knem_dma_track(x->ctx, chan))
		return knem_dma_by_cpu(x);
	max = knem_dma_pieces(x) * 2 + 2;
	map = kvzalloc(struct_size(map, ent, max), GFP_KERNEL | __GFP_NOWARN);
	if (!map)
		return knem_dma_by_cpu(x);
	map->chan = chan;
	map->dev = chan->device->dev;
	map->max = max;
	init_completion(&map->done);
	x->map = map;

	err = knem_dma_map_data(x, map);
	if (!err && chain)
		err = knem_dma_map_status(x, map);
	if (err)
		return knem_dma_fallback(x, map, 0);
	pairs = map->nr / 2;
	if (chain)
		INIT_WORK(&x->done_work, knem_dma_async_work);
	err = knem_dma_submit(x, map, pairs, chain, &last);
	if (err)
		return knem_dma_fallback(x, map, last);
	dma_async_issue_pending(chan);
	if (chain)
		return -EINPROGRESS;

	wait_for_completion(&map->done);
	err = map->result == DMA_TRANS_NOERROR ? 0 : -EIO;
	knem_dma_unmap(map);
	x->map = NULL;
	return err;
}
