// SPDX-License-Identifier: GPL-2.0
/*
 * DMA copy engine over the generic dmaengine API: any provider with the
 * DMA_MEMCPY capability (I/OAT, DSA, the test-only softdma) will do.
 *
 * knem is a dmaengine client of the public memcpy channels (dmaengine_get()
 * at load): channels registered after knem loaded become usable
 * immediately, and their providers stay loaded as long as knem is.
 *
 * Both sides of a DMA copy are pinned.  Each physically contiguous run is
 * mapped for the channel's device and becomes one memcpy descriptor; a run
 * the device cannot copy (is_dma_copy_aligned() false) is copied by the
 * CPU instead.  A copy is always waited for by a task: the caller
 * (synchronous DMA, killable) or an offload worker (DMATHREAD and
 * ASYNCDMACOMPLETE), and its status is written by the CPU afterwards.
 *
 * Several channels.  One channel moves a few GB/s; a machine has several
 * (one I/OAT function per channel, or one device with many).  A copy of at
 * least two dma_split_min is cut into as many lanes, up to dma_channels,
 * each on its own channel: the engines then move it together, as a
 * message is striped over network rails (Aumage, Brunet, Furmento and
 * Namyst, "NewMadeleine: a Fast Communication Scheduling Engine for High
 * Performance Networks", CAC 2007).  Lanes are cut where a page or an
 * iovec of either side ends, at the first such boundary at or past each
 * equal share: a cut lies less than a page past its share, and no
 * descriptor loses the alignment it had.
 * The first lane takes the channel dma_find_channel() gives this CPU (the
 * choice a one-lane copy always made), the next ones the following
 * channels of the table below.  Every lane is submitted before any is
 * waited for.
 *
 * dmaengine offers no list of its channels: dma_find_channel() gives one
 * per CPU.  The table of channels is therefore what every CPU's
 * dma_find_channel() answers, plus the other channels of those devices
 * that pass the tests dma_channel_rebalance() makes (public, with a
 * client), sorted by device and channel number.  It is built again, at
 * most once a second, when this CPU's channel is not in it (a provider
 * came or went); meanwhile such a copy takes that one channel.
 *
 * Every descriptor reports its own result: dmaengine does not promise that
 * a channel halts after an error, so one failed descriptor among many, on
 * any lane, fails the copy even when the last one succeeded, and no status
 * the engine wrote could be taken back - hence no engine-written status.
 * The wait has a timeout (dma_timeout_ms) shared by the lanes: the lanes
 * not done then are stopped with dmaengine_terminate_sync() before any
 * page is unmapped or unpinned, and the copy fails (-ETIMEDOUT, or -EINTR
 * for a killed caller) at once.  An engine that refuses to stop may still
 * write the pages: the copy fails all the same, but its mapping is
 * abandoned to the lanes' callbacks, holding both regions (so their pages
 * stay pinned and mapped) until the last descriptor completes; a worker
 * then unmaps and drops them.  Nothing waits for such an engine but the
 * module's unload.
 *
 * If an engine cannot take a descriptor, what was submitted on every lane
 * is waited for and the whole copy is redone by the CPU (counted as a DMA
 * fallback).
 */
#include <linux/dmaengine.h>
#include <linux/dma-mapping.h>
#include <linux/vmalloc.h>
#include <linux/slab.h>
#include <linux/highmem.h>
#include <linux/math64.h>
#include <linux/sort.h>
#include <linux/smp.h>
#include <linux/cpu.h>

#include "knem_priv.h"

struct knem_dma_ent {
	dma_addr_t addr;
	u32 len;
	enum dma_data_direction dir;
};

struct knem_dma_map;

/* The part of a copy one channel moves: ent[first .. first + nr). */
struct knem_dma_lane {
	struct knem_dma_map *map;
	struct dma_chan *chan;
	struct device *dev;
	int slot;		/* in the channel table (statistics), or -1 */
	unsigned int first;
	unsigned int nr;	/* mapped entries: (source, destination) pairs */
	u64 bytes;		/* given to the engine */
	atomic_t pending;	/* submitted and not completed, +1 meanwhile */
	atomic_t failed;	/* some descriptor reported an error */
	struct completion done;
};

struct knem_dma_map {
	/* Lanes done, and whether the waiter left; any context. */
	spinlock_t lock;
	unsigned int lanes_done;
	bool abandoned;
	/* Held while abandoned: the pages the engine may still write. */
	struct knem_region *src, *dst;
	struct work_struct reap;
	unsigned int nr_lanes;
	unsigned int nr;	/* entries mapped, all lanes */
	unsigned int max;
	struct knem_dma_lane lane[KNEM_MAX_DMA_CHANS];
	struct knem_dma_ent ent[];
};

/* The memcpy channels a copy may be split over. */
struct knem_dma_table {
	unsigned int nr;
	struct dma_chan *chan[KNEM_MAX_DMA_CHANS];
	struct rcu_head rcu;
};

static bool knem_dma_client;
static struct knem_dma_table __rcu *knem_dma_table;
static DEFINE_MUTEX(knem_dma_table_lock);

/* Copies abandoned to an engine that would not stop (knem_dma_abandon()). */
static struct workqueue_struct *knem_dma_reap_wq;
static atomic_t knem_dma_abandoned = ATOMIC_INIT(0);
static DECLARE_WAIT_QUEUE_HEAD(knem_dma_abandoned_wq);

int knem_dma_init(void)
{
	knem_dma_reap_wq = alloc_workqueue("knem_dma_reap", WQ_UNBOUND, 0);
	if (!knem_dma_reap_wq)
		return -ENOMEM;
	if (knem_dma_enable) {
		dmaengine_get();
		knem_dma_client = true;
	}
	return 0;
}

void knem_dma_exit(void)
{
	/*
	 * An engine that would not stop may still write abandoned pages:
	 * they stay pinned, and the module loaded, until it is done.
	 */
	wait_event(knem_dma_abandoned_wq, !atomic_read(&knem_dma_abandoned));
	destroy_workqueue(knem_dma_reap_wq);
	/* No file is open: no copy reads the table. */
	kfree(rcu_dereference_protected(knem_dma_table, true));
	if (knem_dma_client)
		dmaengine_put();
}

bool knem_dma_usable(void)
{
	return knem_dma_client && dma_find_channel(DMA_MEMCPY);
}

static void knem_dma_cpu_chan(void *arg)
{
	struct dma_chan **per_cpu = arg;

	per_cpu[smp_processor_id()] = dma_find_channel(DMA_MEMCPY);
}

static bool knem_dma_table_has(const struct knem_dma_table *t,
			       const struct dma_chan *chan)
{
	unsigned int i;

	for (i = 0; i < t->nr; i++)
		if (t->chan[i] == chan)
			return true;
	return false;
}

static void knem_dma_table_add(struct knem_dma_table *t,
			       struct dma_chan *chan)
{
	if (t->nr < KNEM_MAX_DMA_CHANS && !knem_dma_table_has(t, chan))
		t->chan[t->nr++] = chan;
}

/* The other channels of @chan's device that a public client may use. */
static void knem_dma_table_add_siblings(struct knem_dma_table *t,
					struct dma_chan *chan)
{
	struct dma_device *device = chan->device;
	struct dma_chan *sib;

	if (dma_has_cap(DMA_PRIVATE, device->cap_mask) ||
	    !dma_has_cap(DMA_MEMCPY, device->cap_mask))
		return;
	list_for_each_entry(sib, &device->channels, device_node)
		if (READ_ONCE(sib->client_count))
			knem_dma_table_add(t, sib);
}

static int knem_dma_chan_cmp(const void *a, const void *b)
{
	const struct dma_chan *x = *(struct dma_chan * const *)a;
	const struct dma_chan *y = *(struct dma_chan * const *)b;

	if (x->device->dev_id != y->device->dev_id)
		return x->device->dev_id < y->device->dev_id ? -1 : 1;
	if (x->chan_id != y->chan_id)
		return x->chan_id < y->chan_id ? -1 : 1;
	return 0;
}

/*
 * Build the table again from what every CPU's dma_find_channel() says:
 * the CPUs' channels first, so that siblings never crowd one out of a
 * full table.  At most once a second: a CPU whose channel finds no room
 * (over KNEM_MAX_DMA_CHANS) must not send IPIs at every copy.
 */
static void knem_dma_table_rebuild(void)
{
	static unsigned long last;
	struct knem_dma_table *t = NULL, *old;
	struct dma_chan **per_cpu = NULL;
	unsigned int cpu;

	mutex_lock(&knem_dma_table_lock);
	if (rcu_access_pointer(knem_dma_table) &&
	    time_before(jiffies, last + HZ))
		goto out;
	last = jiffies;
	per_cpu = kcalloc(nr_cpu_ids, sizeof(*per_cpu), GFP_KERNEL);
	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!per_cpu || !t)
		goto out;
	cpus_read_lock();
	on_each_cpu(knem_dma_cpu_chan, per_cpu, 1);
	for_each_online_cpu(cpu)
		if (per_cpu[cpu])
			knem_dma_table_add(t, per_cpu[cpu]);
	for_each_online_cpu(cpu)
		if (per_cpu[cpu])
			knem_dma_table_add_siblings(t, per_cpu[cpu]);
	cpus_read_unlock();
	sort(t->chan, t->nr, sizeof(t->chan[0]), knem_dma_chan_cmp, NULL);

	old = rcu_replace_pointer(knem_dma_table, t,
				  lockdep_is_held(&knem_dma_table_lock));
	t = NULL;
	if (old)
		kfree_rcu(old, rcu);
out:
	mutex_unlock(&knem_dma_table_lock);
	kfree(t);
	kfree(per_cpu);
}

/*
 * Build the table again when this CPU's channel is not in it; false when
 * knem has no channel at all.
 */
bool knem_dma_refresh(void)
{
	struct dma_chan *chan;
	struct knem_dma_table *t;
	bool found;

	chan = knem_dma_client ? dma_find_channel(DMA_MEMCPY) : NULL;
	if (!chan)
		return false;
	rcu_read_lock();
	t = rcu_dereference(knem_dma_table);
	found = t && knem_dma_table_has(t, chan);
	rcu_read_unlock();
	if (!found)
		knem_dma_table_rebuild();
	return true;
}

/* How many of the table's @nr channels a copy may use: dma_channels. */
static unsigned int knem_dma_limit(unsigned int nr)
{
	unsigned int limit = READ_ONCE(knem_dma_channels);

	return limit ? min(nr, limit) : nr;
}

/* Channels a copy may be split over now. */
unsigned int knem_dma_nr_chans(void)
{
	struct knem_dma_table *t;
	unsigned int nr = 0;

	rcu_read_lock();
	t = rcu_dereference(knem_dma_table);
	if (t)
		nr = knem_dma_limit(t->nr);
	rcu_read_unlock();
	return nr;
}

/* Channels in the table, used or not. */
unsigned int knem_dma_table_size(void)
{
	struct knem_dma_table *t;
	unsigned int nr = 0;

	rcu_read_lock();
	t = rcu_dereference(knem_dma_table);
	if (t)
		nr = t->nr;
	rcu_read_unlock();
	return nr;
}

/* Name of the channel at @slot of the table, for the statistics. */
int knem_dma_chan_name(unsigned int slot, char *buf, size_t size)
{
	struct knem_dma_table *t;
	int len = 0;

	rcu_read_lock();
	t = rcu_dereference(knem_dma_table);
	if (t && slot < t->nr)
		len = strscpy(buf, dma_chan_name(t->chan[slot]), size);
	rcu_read_unlock();
	return len;
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

static void knem_dma_lane_set(struct knem_dma_map *map,
			      struct knem_dma_lane *lane,
			      struct dma_chan *chan, int slot)
{
	lane->map = map;
	lane->chan = chan;
	lane->dev = chan->device->dev;
	lane->slot = slot;
}

/*
 * Choose the lanes of a copy of @length bytes: the first on @first (this
 * CPU's channel), the next ones on the channels after it in the table.
 * Returns false when the table does not hold @first.
 */
static bool knem_dma_lanes_pick(struct knem_ctx *ctx, struct knem_dma_map *map,
				struct dma_chan *first, u64 length)
{
	unsigned int split_min = max_t(unsigned int,
				       READ_ONCE(knem_dma_split_min), PAGE_SIZE);
	unsigned int want, nr = 0, start, i;
	struct knem_dma_table *t;
	bool found = false;

	rcu_read_lock();
	t = rcu_dereference(knem_dma_table);
	for (start = 0; t && start < t->nr; start++) {
		if (t->chan[start] == first) {
			found = true;
			break;
		}
	}
	if (found) {
		want = min_t(u64, div_u64(length, split_min), t->nr);
		want = min(max(want, 1U), knem_dma_limit(t->nr));
		for (i = 0; i < want; i++) {
			unsigned int slot = (start + i) % t->nr;

			if (knem_dma_track(ctx, t->chan[slot]))
				knem_dma_lane_set(map, &map->lane[nr++],
						  t->chan[slot], slot);
		}
	}
	rcu_read_unlock();
	map->nr_lanes = nr;
	return found;
}

/* At least one lane, or false: no channel this file may use. */
static bool knem_dma_lanes(struct knem_ctx *ctx, struct knem_dma_map *map,
			   struct dma_chan *first, u64 length)
{
	if (!knem_dma_lanes_pick(ctx, map, first, length)) {
		knem_dma_table_rebuild();
		if (!knem_dma_lanes_pick(ctx, map, first, length) &&
		    knem_dma_track(ctx, first)) {
			/* A provider came or went meanwhile: this CPU's one. */
			knem_dma_lane_set(map, &map->lane[0], first, -1);
			map->nr_lanes = 1;
		}
	}
	return map->nr_lanes > 0;
}

static int knem_dma_map_one(struct knem_dma_map *map,
			    struct knem_dma_lane *lane, struct page *page,
			    unsigned int off, unsigned int len,
			    enum dma_data_direction dir)
{
	struct knem_dma_ent *e = &map->ent[map->nr];

	if (map->nr >= map->max)
		return -ENOSPC;
	e->addr = dma_map_page(lane->dev, page, off, len, dir);
	if (dma_mapping_error(lane->dev, e->addr))
		return -ENOMEM;
	e->len = len;
	e->dir = dir;
	map->nr++;
	lane->nr++;
	return 0;
}

static void knem_dma_unmap(struct knem_dma_map *map)
{
	unsigned int l, i;

	for (l = 0; l < map->nr_lanes; l++) {
		struct knem_dma_lane *lane = &map->lane[l];

		for (i = lane->first; i < lane->first + lane->nr; i++)
			dma_unmap_page(lane->dev, map->ent[i].addr,
				       map->ent[i].len, map->ent[i].dir);
	}
	kvfree(map);
}

/* Upper bound of page-bounded pieces: each list adds a piece per page
 * touched plus partial pages at segment edges, and each lane cut one more.
 */
static unsigned int knem_dma_pieces(const struct knem_xfer *x)
{
	u64 pages = DIV_ROUND_UP(x->length, PAGE_SIZE);

	return 2 * (pages + x->src->pin.nr_segs + x->dst->pin.nr_segs) +
	       KNEM_MAX_DMA_CHANS;
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
			      struct knem_dma_lane *lane,
			      struct knem_dma_run *run)
{
	int err;

	if (!run->len)
		return 0;
	if (!is_dma_copy_aligned(lane->chan->device, run->soff, run->doff,
				 run->len)) {
		knem_dma_run_by_cpu(run);
		run->len = 0;
		return 0;
	}
	err = knem_dma_map_one(map, lane, run->spage, run->soff, run->len,
			       DMA_TO_DEVICE);
	if (!err)
		err = knem_dma_map_one(map, lane, run->dpage, run->doff,
				       run->len, DMA_FROM_DEVICE);
	if (!err)
		lane->bytes += run->len;
	run->len = 0;
	return err;
}

/*
 * Add a piece to the current run when it continues it physically on both
 * sides (huge pages, or neighbouring frames), so that one descriptor
 * moves up to the device's segment size instead of one page.
 */
static int knem_dma_run_add(struct knem_dma_map *map,
			    struct knem_dma_lane *lane,
			    struct knem_dma_run *run,
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
	    run->len + len <= dma_get_max_seg_size(lane->dev)) {
		run->len += len;
		return 0;
	}
	err = knem_dma_run_flush(map, lane, run);
	if (err)
		return err;
	*run = (struct knem_dma_run){ spage, dpage, soff, doff, len };
	return 0;
}

/* Where lane @l of @nr ends: its equal share of @length, rounded down. */
static u64 knem_dma_lane_end(u64 length, unsigned int l, unsigned int nr)
{
	return l + 1 == nr ? length : mul_u64_u32_div(length, l + 1, nr);
}

/*
 * Map every (source, destination) run of the copy, in order.  A lane ends
 * at the first piece boundary (a page or segment edge of either side) at
 * or past its share: the run is flushed and the next lane begins.
 */
static int knem_dma_map_data(struct knem_xfer *x, struct knem_dma_map *map)
{
	struct knem_dma_run run = { .len = 0 };
	struct knem_cursor src, dst;
	struct page *spage, *dpage;
	unsigned int soff, slen, doff, dlen, l = 0;
	u64 pos = 0, end = knem_dma_lane_end(x->length, 0, map->nr_lanes);
	int err;

	knem_cursor_init(&src, &x->src->pin, x->src_off, x->length);
	knem_cursor_init(&dst, &x->dst->pin, x->dst_off, x->length);
	while (knem_cursor_next(&src, PAGE_SIZE, &spage, &soff, &slen)) {
		unsigned int done = 0;

		while (done < slen &&
		       knem_cursor_next(&dst, slen - done, &dpage, &doff,
					&dlen)) {
			if (pos >= end && l + 1 < map->nr_lanes) {
				err = knem_dma_run_flush(map, &map->lane[l],
							 &run);
				if (err)
					return err;
				map->lane[++l].first = map->nr;
				end = knem_dma_lane_end(x->length, l,
							map->nr_lanes);
			}
			err = knem_dma_run_add(map, &map->lane[l], &run, spage,
					       soff + done, dpage, doff, dlen);
			if (err)
				return err;
			done += dlen;
			pos += dlen;
		}
		if (done < slen)
			return -EIO;
	}
	return knem_dma_run_flush(map, &map->lane[l], &run);
}

/*
 * An abandoned copy's last descriptor completed: the engine is done with
 * its pages.  Unmap them, then unpin (the regions' last references).
 */
static void knem_dma_reap(struct work_struct *work)
{
	struct knem_dma_map *map = container_of(work, struct knem_dma_map,
						reap);

	knem_region_put(map->src);
	knem_region_put(map->dst);
	knem_dma_unmap(map);
	if (atomic_dec_and_test(&knem_dma_abandoned))
		wake_up(&knem_dma_abandoned_wq);
}

/*
 * @lane has nothing outstanding any more.  The lock orders this against
 * knem_dma_abandon(): once the waiter left, the last lane done hands the
 * map to a worker; before, the waiter owns it and takes the lock once
 * before freeing it (knem_dma_settle()).
 */
static void knem_dma_lane_done(struct knem_dma_lane *lane)
{
	struct knem_dma_map *map = lane->map;
	unsigned long flags;
	bool reap;

	spin_lock_irqsave(&map->lock, flags);
	complete(&lane->done);
	reap = ++map->lanes_done == map->nr_lanes && map->abandoned;
	spin_unlock_irqrestore(&map->lock, flags);
	if (reap)
		queue_work(knem_dma_reap_wq, &map->reap);
}

/* Called once per descriptor, possibly in softirq context. */
static void knem_dma_desc_done(void *param,
			       const struct dmaengine_result *result)
{
	struct knem_dma_lane *lane = param;

	if (result && result->result != DMA_TRANS_NOERROR)
		atomic_set(&lane->failed, 1);
	if (atomic_dec_and_test(&lane->pending))
		knem_dma_lane_done(lane);
}

/*
 * Submit one descriptor per mapped pair of @lane, each with its own
 * callback, and start the channel.  On error the descriptors already
 * submitted run on and are waited for as usual.
 */
static int knem_dma_submit_lane(struct knem_dma_map *map,
				struct knem_dma_lane *lane)
{
	struct dma_async_tx_descriptor *tx;
	struct knem_dma_ent *e;
	unsigned int i;
	int err = 0;

	for (i = 0; i < lane->nr / 2; i++) {
		e = &map->ent[lane->first + 2 * i];
		tx = dmaengine_prep_dma_memcpy(lane->chan, e[1].addr, e[0].addr,
					       e[0].len,
					       DMA_CTRL_ACK | DMA_PREP_INTERRUPT);
		if (!tx) {
			err = -EBUSY;
			break;
		}
		tx->callback_result = knem_dma_desc_done;
		tx->callback_param = lane;
		atomic_inc(&lane->pending);
		if (dma_submit_error(dmaengine_submit(tx))) {
			atomic_dec(&lane->pending);
			err = -EBUSY;
			break;
		}
	}
	if (i)
		dma_async_issue_pending(lane->chan);
	return err;
}

/*
 * Submit every lane before waiting for any.  After a refusal the lanes
 * left are not submitted: the CPU will redo the copy.
 */
static int knem_dma_submit(struct knem_dma_map *map)
{
	struct knem_dma_lane *lane;
	unsigned int l;
	int err = 0;

	spin_lock_init(&map->lock);
	INIT_WORK(&map->reap, knem_dma_reap);
	for (l = 0; l < map->nr_lanes; l++) {
		lane = &map->lane[l];
		atomic_set(&lane->pending, 1);
		atomic_set(&lane->failed, 0);
		init_completion(&lane->done);
		if (!err)
			err = knem_dma_submit_lane(map, lane);
		if (atomic_dec_and_test(&lane->pending))
			knem_dma_lane_done(lane);
	}
	return err;
}

/*
 * Leave @map to its lanes' callbacks, holding @x's regions, unless every
 * lane is done meanwhile.  Returns true when the map is theirs now.
 */
static bool knem_dma_abandon(struct knem_dma_map *map, struct knem_xfer *x)
{
	unsigned long flags;
	bool left;

	spin_lock_irqsave(&map->lock, flags);
	left = map->lanes_done < map->nr_lanes;
	if (left) {
		map->abandoned = true;
		map->src = x->src;
		map->dst = x->dst;
		kref_get(&x->src->kref);
		kref_get(&x->dst->kref);
		atomic_inc(&knem_dma_abandoned);
	}
	spin_unlock_irqrestore(&map->lock, flags);
	return left;
}

/* Every lane is done: let the last callback leave the lock. */
static void knem_dma_settle(struct knem_dma_map *map)
{
	unsigned long flags;

	spin_lock_irqsave(&map->lock, flags);
	spin_unlock_irqrestore(&map->lock, flags);
}

/*
 * Stop the lanes not done.  Returns false when an engine refused: it may
 * still write the pages, which must stay pinned and mapped until it is
 * done (knem_dma_abandon()).
 */
static bool knem_dma_terminate(struct knem_dma_map *map, int err)
{
	struct knem_dma_lane *lane;
	bool stopped = true;
	unsigned int l;

	for (l = 0; l < map->nr_lanes; l++) {
		lane = &map->lane[l];
		if (completion_done(&lane->done))
			continue;
		pr_warn_ratelimited("knem: DMA copy on %s %s, terminating the channel\n",
				    dma_chan_name(lane->chan),
				    err == -EINTR ? "interrupted" : "timed out");
		if (dmaengine_terminate_sync(lane->chan)) {
			pr_warn_ratelimited("knem: %s would not stop, its pages stay pinned until it is done\n",
					    dma_chan_name(lane->chan));
			stopped = false;
		} else if (!completion_done(&lane->done)) {
			/* Dropped descriptors call back no more. */
			knem_dma_lane_done(lane);
		}
	}
	return stopped;
}

/*
 * Wait for the lanes, all within one dma_timeout_ms: 0, -EIO when a
 * descriptor failed, or, after the timeout or a fatal signal,
 * -ETIMEDOUT / -EINTR once the lanes not done are stopped.  *@stuck says
 * that an engine would not stop.
 */
static int knem_dma_wait(struct knem_dma_map *map, bool killable,
			 bool *stuck)
{
	unsigned long deadline = jiffies +
		msecs_to_jiffies(READ_ONCE(knem_dma_timeout_ms));
	unsigned int l;
	long left = 1;
	int err = 0;

	for (l = 0; l < map->nr_lanes && left > 0; l++) {
		struct completion *done = &map->lane[l].done;
		long timeout = max_t(long, (long)(deadline - jiffies), 0);

		if (killable)
			left = wait_for_completion_killable_timeout(done,
								    timeout);
		else
			left = wait_for_completion_timeout(done, timeout);
	}
	if (left <= 0) {
		err = left < 0 ? -EINTR : -ETIMEDOUT;
		knem_stat_add(KNEM_STAT_DMA_TIMEOUTS, 1);
		*stuck = !knem_dma_terminate(map, err);
		return err;
	}
	for (l = 0; l < map->nr_lanes; l++)
		if (atomic_read(&map->lane[l].failed))
			return -EIO;
	return 0;
}

/* What each channel moved, once the copy succeeded. */
static void knem_dma_account(const struct knem_dma_map *map)
{
	unsigned int l;

	for (l = 0; l < map->nr_lanes; l++)
		if (map->lane[l].slot >= 0)
			knem_stat_chan_add(map->lane[l].slot,
					   map->lane[l].bytes);
	if (map->nr_lanes > 1)
		knem_stat_add(KNEM_STAT_DMA_SPLIT, 1);
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
 * Copy @x, both sides pinned, with DMA channels, and wait for it: in the
 * caller (@killable) or on a worker.  Returns 0 when the data is there,
 * an error when the copy failed; either way no descriptor is left running.
 */
int knem_dma_copy(struct knem_xfer *x, bool killable)
{
	struct dma_chan *chan = dma_find_channel(DMA_MEMCPY);
	struct knem_dma_map *map;
	bool stuck = false;
	unsigned int max;
	int err, werr;

	x->engine = KNEM_ENGINE_DMA;
	if (!chan)
		return knem_dma_by_cpu(x);
	max = knem_dma_pieces(x) * 2;
	map = kvzalloc(struct_size(map, ent, max),
		       KNEM_GFP);
	if (!map)
		return knem_dma_by_cpu(x);
	map->max = max;
	if (!knem_dma_lanes(x->ctx, map, chan, x->length)) {
		kvfree(map);
		return knem_dma_by_cpu(x);
	}

	err = knem_dma_map_data(x, map);
	if (err) {
		knem_dma_unmap(map);
		return knem_dma_by_cpu(x);
	}
	err = knem_dma_submit(map);
	werr = knem_dma_wait(map, killable, &stuck);
	if (stuck && knem_dma_abandon(map, x))
		return werr;
	knem_dma_settle(map);
	if (!err && !werr)
		knem_dma_account(map);
	knem_dma_unmap(map);
	if (werr)
		return werr;
	/* An engine refused part of it: the CPU redoes the whole copy. */
	return err ? knem_dma_by_cpu(x) : 0;
}
