// SPDX-License-Identifier: GPL-2.0
/*
 * Counters behind the human-readable statistics that read() returns on a
 * read-only /dev/knem file (as KNEM does): totals since load, the pages
 * pinned right now (must fall back to 0 once every user is gone), and the
 * reading file's own regions and pins.
 */
#include <linux/atomic.h>
#include <linux/slab.h>
#include <linux/fs.h>

#include "knem_priv.h"

static atomic64_t knem_stats[KNEM_STAT_NR];
static atomic_long_t knem_pinned_now;

static const char *const knem_stat_names[KNEM_STAT_NR] = {
	[KNEM_STAT_REGIONS_CREATED] = "regions created",
	[KNEM_STAT_REGIONS_DESTROYED] = "regions destroyed",
	[KNEM_STAT_COPIES_CPU] = "copies cpu",
	[KNEM_STAT_COPIES_THREAD] = "copies kthread",
	[KNEM_STAT_COPIES_DMA] = "copies dma",
	[KNEM_STAT_BYTES_CPU] = "bytes cpu",
	[KNEM_STAT_BYTES_THREAD] = "bytes kthread",
	[KNEM_STAT_BYTES_DMA] = "bytes dma",
	[KNEM_STAT_COPIES_FAILED] = "copies failed",
	[KNEM_STAT_DMA_FALLBACKS] = "dma fallbacks to cpu",
	[KNEM_STAT_DMA_CPU_PIECES] = "dma pieces copied by cpu",
	[KNEM_STAT_DMA_TIMEOUTS] = "dma timeouts",
	[KNEM_STAT_DMA_SPLIT] = "dma copies split",
};

/* Bytes each channel of knem_dma.c's table moved, by slot. */
static atomic64_t knem_chan_bytes[KNEM_MAX_DMA_CHANS];

void knem_stat_add(enum knem_stat stat, u64 value)
{
	atomic64_add(value, &knem_stats[stat]);
}

void knem_stat_chan_add(unsigned int slot, u64 bytes)
{
	if (slot < KNEM_MAX_DMA_CHANS)
		atomic64_add(bytes, &knem_chan_bytes[slot]);
}

/* One line per channel of the table: its name, then the bytes it moved. */
static size_t knem_stats_chans(char *text, size_t size, size_t len)
{
	unsigned int nr, i;
	char name[32];

	knem_dma_refresh();
	nr = knem_dma_table_size();
	len += scnprintf(text + len, size - len, "dma channels: %u\n",
			 knem_dma_nr_chans());
	for (i = 0; i < nr && i < KNEM_MAX_DMA_CHANS; i++) {
		if (!knem_dma_chan_name(i, name, sizeof(name)))
			break;
		len += scnprintf(text + len, size - len,
				 "dma channel %u %s bytes: %lld\n", i, name,
				 (long long)atomic64_read(&knem_chan_bytes[i]));
	}
	return len;
}

void knem_pinned_add(long pages)
{
	atomic_long_add(pages, &knem_pinned_now);
}

long knem_pinned_total(void)
{
	return atomic_long_read(&knem_pinned_now);
}

ssize_t knem_stats_read(struct knem_ctx *ctx, char __user *buf, size_t count,
			loff_t *ppos)
{
	size_t size = PAGE_SIZE, len = 0;
	ssize_t ret;
	char *text;
	int i;

	text = kmalloc(size, KNEM_GFP);
	if (!text)
		return -ENOMEM;
	len += scnprintf(text + len, size - len, "knem ABI 0x%x\n",
			 KNEM_ABI_VERSION);
	len += scnprintf(text + len, size - len, "dma channel: %s\n",
			 knem_dma_usable() ? "yes" : "no");
	for (i = 0; i < KNEM_STAT_NR; i++)
		len += scnprintf(text + len, size - len, "%s: %lld\n",
				 knem_stat_names[i],
				 (long long)atomic64_read(&knem_stats[i]));
	len = knem_stats_chans(text, size, len);
	len += scnprintf(text + len, size - len, "pinned pages: %ld\n",
			 knem_pinned_total());
	spin_lock(&ctx->regions_lock);
	len += scnprintf(text + len, size - len, "this file regions: %lu\n",
			 ctx->nr_regions);
	spin_unlock(&ctx->regions_lock);
	len += scnprintf(text + len, size - len,
			 "this file pinned pages: %ld\n",
			 atomic_long_read(&ctx->pinned_pages));
	ret = simple_read_from_buffer(buf, count, ppos, text, len);
	kfree(text);
	return ret;
}
