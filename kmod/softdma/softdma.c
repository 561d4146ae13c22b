// SPDX-License-Identifier: GPL-2.0
/*
 * softdma - a test-only dmaengine provider: DMA_MEMCPY channels whose
 * descriptors are executed in order, asynchronously, by one kernel thread
 * per channel.  It lets knem's DMA paths (synchronous, DMATHREAD, and the
 * ASYNCDMACOMPLETE chained status write) run under QEMU, which emulates no
 * I/OAT or DSA.  Not for production: a CPU doing the copy saves nothing.
 *
 * The trick: a real engine reads and writes bus addresses.  softdma owns a
 * platform device with no IOMMU and no DMA ops, so dma_map_page() on it is
 * dma-direct and returns the physical address (checked at load: if the
 * mapping is not the identity - IOMMU, forced swiotlb, memory encryption -
 * the module refuses to load).  The thread turns each bus address back
 * into a kernel pointer with phys_to_virt(), valid for all RAM on x86-64,
 * after checking that both ends are RAM pages.
 *
 * Test knobs (writable at run time), the faults of real engines:
 *  - fail_every=N: every Nth descriptor (counted per channel from the
 *    time it is set) completes with DMA_TRANS_WRITE_FAILED without copying;
 *  - halt_on_error (1): like I/OAT, whose channel halts on an error, a
 *    failure aborts every descriptor issued before it was seen
 *    (DMA_TRANS_ABORTED, not executed); 0 keeps running after the error,
 *    as dmaengine allows, so later descriptors succeed;
 *  - copy_align=S: the engine demands 2^S-byte aligned addresses and
 *    lengths (advertised in copy_align) and fails a descriptor that is not;
 *  - stall=1: the channels stop executing (until stall=0 or
 *    dmaengine_terminate_sync(), which drops what was queued);
 *  - max_queued=N: prep fails once that many descriptors are outstanding
 *    on a channel;
 *  - refuse_terminate=1: dmaengine_terminate_*() fails (-EBUSY) and drops
 *    nothing, as an engine that cannot be stopped: what was queued runs
 *    once the channel does;
 *  - fault_channel=K: fail_every and stall act on channel K only (-1, the
 *    default: on every channel), so that one lane of a copy split over
 *    several channels fails or stalls while the others run.
 */
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/dmaengine.h>
#include <linux/dma-mapping.h>
#include <linux/kthread.h>
#include <linux/slab.h>
#include <linux/io.h>
#include <linux/mm.h>
#include <linux/sizes.h>

#define SOFTDMA_MAX_CHANS 16

static unsigned int nr_channels = 2;
module_param(nr_channels, uint, 0444);
MODULE_PARM_DESC(nr_channels, "DMA_MEMCPY channels to register (2, max 16)");

static int softdma_set_fail_every(const char *val,
				  const struct kernel_param *kp);

static unsigned int fail_every;
static const struct kernel_param_ops softdma_fail_every_ops = {
	.set = softdma_set_fail_every,
	.get = param_get_uint,
};
module_param_cb(fail_every, &softdma_fail_every_ops, &fail_every, 0644);
MODULE_PARM_DESC(fail_every, "Fail every Nth descriptor from now on, 0 = never (0)");

static bool halt_on_error = true;
module_param(halt_on_error, bool, 0644);
MODULE_PARM_DESC(halt_on_error, "Abort the queued descriptors after an error, as I/OAT (1)");

static int softdma_set_copy_align(const char *val, const struct kernel_param *kp);
static int softdma_set_stall(const char *val, const struct kernel_param *kp);

static unsigned int copy_align;
static const struct kernel_param_ops softdma_copy_align_ops = {
	.set = softdma_set_copy_align,
	.get = param_get_uint,
};
module_param_cb(copy_align, &softdma_copy_align_ops, &copy_align, 0644);
MODULE_PARM_DESC(copy_align, "Demand 2^copy_align byte aligned copies, 0-12 (0)");

static bool stall;
static const struct kernel_param_ops softdma_stall_ops = {
	.set = softdma_set_stall,
	.get = param_get_bool,
};
module_param_cb(stall, &softdma_stall_ops, &stall, 0644);
MODULE_PARM_DESC(stall, "Stop executing descriptors while set (0)");

static bool refuse_terminate;
module_param(refuse_terminate, bool, 0644);
MODULE_PARM_DESC(refuse_terminate, "Fail dmaengine_terminate_*() and keep the queue, as an engine that cannot be stopped (0)");

static unsigned int max_queued = 1U << 20;
module_param(max_queued, uint, 0644);
MODULE_PARM_DESC(max_queued, "Refuse prep beyond this many outstanding descriptors per channel");

static int softdma_set_fault_channel(const char *val,
				     const struct kernel_param *kp);

static int fault_channel = -1;
static const struct kernel_param_ops softdma_fault_channel_ops = {
	.set = softdma_set_fault_channel,
	.get = param_get_int,
};
module_param_cb(fault_channel, &softdma_fault_channel_ops, &fault_channel, 0644);
MODULE_PARM_DESC(fault_channel, "The one channel fail_every and stall act on, -1 = all (-1)");

struct softdma_desc {
	struct dma_async_tx_descriptor txd;
	struct list_head node;
	dma_addr_t dst;
	dma_addr_t src;
	size_t len;
};

struct softdma_chan {
	struct dma_chan chan;
	spinlock_t lock;		/* lists, counters, cookies */
	struct list_head submitted;	/* tx_submit'ed, not yet issued */
	struct list_head issued;	/* for the thread, in order */
	unsigned int outstanding;	/* prepared and not completed */
	unsigned long executed;
	bool busy;
	bool aborting;		/* a descriptor failed: abort the issued ones */
	wait_queue_head_t work_wq;
	wait_queue_head_t idle_wq;
	struct task_struct *thread;
	unsigned int index;		/* in struct softdma: fault_channel */
};

struct softdma {
	struct dma_device dma;
	struct platform_device *pdev;
	unsigned int nr;
	struct softdma_chan chans[SOFTDMA_MAX_CHANS];
};

static struct softdma *softdma;

static int softdma_set_copy_align(const char *val,
				  const struct kernel_param *kp)
{
	unsigned int shift;
	int err = kstrtouint(val, 0, &shift);

	if (err)
		return err;
	if (shift > PAGE_SHIFT)
		return -EINVAL;
	WRITE_ONCE(copy_align, shift);
	if (softdma)
		softdma->dma.copy_align = shift;
	return 0;
}

/* Counting restarts, so that a test knows which descriptor fails. */
static int softdma_set_fail_every(const char *val,
				  const struct kernel_param *kp)
{
	unsigned int i;
	int err = param_set_uint(val, kp);

	if (err || !softdma)
		return err;
	for (i = 0; i < softdma->nr; i++) {
		spin_lock_irq(&softdma->chans[i].lock);
		softdma->chans[i].executed = 0;
		spin_unlock_irq(&softdma->chans[i].lock);
	}
	return 0;
}

static void softdma_wake_all(void)
{
	unsigned int i;

	for (i = 0; softdma && i < softdma->nr; i++)
		wake_up(&softdma->chans[i].work_wq);
}

/* A channel that stalled may run again. */
static int softdma_set_fault_channel(const char *val,
				     const struct kernel_param *kp)
{
	int chan, err = kstrtoint(val, 0, &chan);

	if (err)
		return err;
	if (chan < -1 || chan >= SOFTDMA_MAX_CHANS ||
	    (softdma && chan >= (int)softdma->nr))
		return -EINVAL;
	WRITE_ONCE(fault_channel, chan);
	softdma_wake_all();
	return 0;
}

/* fail_every and stall act on @sc. */
static bool softdma_faulty(const struct softdma_chan *sc)
{
	int chan = READ_ONCE(fault_channel);

	return chan < 0 || chan == (int)sc->index;
}

static bool softdma_stalled(const struct softdma_chan *sc)
{
	return READ_ONCE(stall) && softdma_faulty(sc);
}

static int softdma_set_stall(const char *val, const struct kernel_param *kp)
{
	int err = param_set_bool(val, kp);

	if (!err)
		softdma_wake_all();
	return err;
}

static struct softdma_chan *to_softdma_chan(struct dma_chan *chan)
{
	return container_of(chan, struct softdma_chan, chan);
}

static struct softdma_desc *to_softdma_desc(struct dma_async_tx_descriptor *t)
{
	return container_of(t, struct softdma_desc, txd);
}

/*
 * Cookie bookkeeping as dmaengine providers do it (the helpers in the
 * kernel's drivers/dma/dmaengine.h are not part of the installed headers).
 */
static dma_cookie_t softdma_cookie_assign(struct dma_async_tx_descriptor *tx)
{
	struct dma_chan *chan = tx->chan;
	dma_cookie_t cookie = chan->cookie + 1;

	if (cookie < DMA_MIN_COOKIE)
		cookie = DMA_MIN_COOKIE;
	tx->cookie = cookie;
	chan->cookie = cookie;
	return cookie;
}

static void softdma_cookie_complete(struct dma_async_tx_descriptor *tx)
{
	tx->chan->completed_cookie = tx->cookie;
	tx->cookie = 0;
}

static dma_cookie_t softdma_tx_submit(struct dma_async_tx_descriptor *tx)
{
	struct softdma_chan *sc = to_softdma_chan(tx->chan);
	struct softdma_desc *d = to_softdma_desc(tx);
	unsigned long flags;
	dma_cookie_t cookie;

	spin_lock_irqsave(&sc->lock, flags);
	cookie = softdma_cookie_assign(tx);
	list_add_tail(&d->node, &sc->submitted);
	spin_unlock_irqrestore(&sc->lock, flags);
	return cookie;
}

static struct dma_async_tx_descriptor *
softdma_prep_memcpy(struct dma_chan *chan, dma_addr_t dst, dma_addr_t src,
		    size_t len, unsigned long flags)
{
	struct softdma_chan *sc = to_softdma_chan(chan);
	struct softdma_desc *d;
	unsigned long irqflags;

	if (!len)
		return NULL;
	spin_lock_irqsave(&sc->lock, irqflags);
	if (sc->outstanding >= READ_ONCE(max_queued)) {
		spin_unlock_irqrestore(&sc->lock, irqflags);
		return NULL;
	}
	sc->outstanding++;
	spin_unlock_irqrestore(&sc->lock, irqflags);

	/* prep may be called in atomic context. */
	d = kzalloc(sizeof(*d), GFP_NOWAIT);
	if (!d) {
		spin_lock_irqsave(&sc->lock, irqflags);
		sc->outstanding--;
		spin_unlock_irqrestore(&sc->lock, irqflags);
		return NULL;
	}
	dma_async_tx_descriptor_init(&d->txd, chan);
	d->txd.flags = flags;
	d->txd.tx_submit = softdma_tx_submit;
	d->dst = dst;
	d->src = src;
	d->len = len;
	INIT_LIST_HEAD(&d->node);
	return &d->txd;
}

static void softdma_issue_pending(struct dma_chan *chan)
{
	struct softdma_chan *sc = to_softdma_chan(chan);
	unsigned long flags;

	spin_lock_irqsave(&sc->lock, flags);
	list_splice_tail_init(&sc->submitted, &sc->issued);
	spin_unlock_irqrestore(&sc->lock, flags);
	wake_up(&sc->work_wq);
}

static enum dma_status softdma_tx_status(struct dma_chan *chan,
					 dma_cookie_t cookie,
					 struct dma_tx_state *state)
{
	struct softdma_chan *sc = to_softdma_chan(chan);
	dma_cookie_t used, done;
	unsigned long flags;

	spin_lock_irqsave(&sc->lock, flags);
	used = chan->cookie;
	done = chan->completed_cookie;
	spin_unlock_irqrestore(&sc->lock, flags);
	dma_set_tx_state(state, done, used, 0);
	return dma_async_is_complete(cookie, done, used);
}

static bool softdma_idle(struct softdma_chan *sc)
{
	bool idle;

	spin_lock_irq(&sc->lock);
	idle = list_empty(&sc->issued) && !sc->busy;
	spin_unlock_irq(&sc->lock);
	return idle;
}

/* Returns once every issued descriptor ran and its callback returned. */
static void softdma_synchronize(struct dma_chan *chan)
{
	struct softdma_chan *sc = to_softdma_chan(chan);

	wait_event(sc->idle_wq, softdma_idle(sc));
}

/*
 * Drop every descriptor not yet executed, without callbacks, as
 * dmaengine_terminate_*() requires; the one executing (if any) finishes.
 */
static int softdma_terminate_all(struct dma_chan *chan)
{
	struct softdma_chan *sc = to_softdma_chan(chan);
	struct softdma_desc *d, *next;
	unsigned long flags;
	LIST_HEAD(dead);

	if (READ_ONCE(refuse_terminate))
		return -EBUSY;
	spin_lock_irqsave(&sc->lock, flags);
	list_splice_tail_init(&sc->submitted, &dead);
	list_splice_tail_init(&sc->issued, &dead);
	list_for_each_entry(d, &dead, node)
		sc->outstanding--;
	chan->completed_cookie = chan->cookie;
	sc->aborting = false;
	spin_unlock_irqrestore(&sc->lock, flags);
	list_for_each_entry_safe(d, next, &dead, node)
		kfree(d);
	wake_up(&sc->idle_wq);
	return 0;
}

static int softdma_alloc_chan_resources(struct dma_chan *chan)
{
	return 0;
}

static void softdma_free_chan_resources(struct dma_chan *chan)
{
	softdma_synchronize(chan);
}

static bool softdma_is_ram(dma_addr_t addr, size_t len)
{
	return pfn_valid(PHYS_PFN(addr)) && pfn_valid(PHYS_PFN(addr + len - 1));
}

static enum dmaengine_tx_result softdma_execute(struct softdma_chan *sc,
						struct softdma_desc *d)
{
	unsigned int every = READ_ONCE(fail_every);
	u64 align_mask = (1ULL << READ_ONCE(copy_align)) - 1;

	sc->executed++;
	if (every && !(sc->executed % every) && softdma_faulty(sc))
		return DMA_TRANS_WRITE_FAILED;
	if ((d->src | d->dst | d->len) & align_mask)
		return DMA_TRANS_WRITE_FAILED;
	if (!softdma_is_ram(d->src, d->len))
		return DMA_TRANS_READ_FAILED;
	if (!softdma_is_ram(d->dst, d->len))
		return DMA_TRANS_WRITE_FAILED;
	/* Bus address == physical address: checked in softdma_identity(). */
	memcpy(phys_to_virt(d->dst), phys_to_virt(d->src), d->len);
	return DMA_TRANS_NOERROR;
}

static void softdma_complete(struct softdma_chan *sc, struct softdma_desc *d,
			     enum dmaengine_tx_result res)
{
	struct dmaengine_result result = { .result = res };
	struct dma_async_tx_descriptor *tx = &d->txd;

	spin_lock_irq(&sc->lock);
	softdma_cookie_complete(tx);
	sc->outstanding--;
	spin_unlock_irq(&sc->lock);
	if (tx->callback_result)
		tx->callback_result(tx->callback_param, &result);
	else if (tx->callback)
		tx->callback(tx->callback_param);
	/* Descriptors are single-shot: clients must not reuse them. */
	kfree(d);
}

static int softdma_thread(void *data)
{
	struct softdma_chan *sc = data;
	enum dmaengine_tx_result res;
	struct softdma_desc *d;

	while (!kthread_should_stop()) {
		wait_event_interruptible(sc->work_wq,
					 (!list_empty(&sc->issued) &&
					  !softdma_stalled(sc)) ||
					 kthread_should_stop());
		spin_lock_irq(&sc->lock);
		d = softdma_stalled(sc) ? NULL :
			list_first_entry_or_null(&sc->issued,
						 struct softdma_desc, node);
		if (d) {
			list_del(&d->node);
			sc->busy = true;
		}
		spin_unlock_irq(&sc->lock);
		if (!d)
			continue;
		if (sc->aborting) {
			res = DMA_TRANS_ABORTED;
		} else {
			res = softdma_execute(sc, d);
			sc->aborting = res != DMA_TRANS_NOERROR &&
				       READ_ONCE(halt_on_error);
		}
		softdma_complete(sc, d, res);
		spin_lock_irq(&sc->lock);
		sc->busy = false;
		/* The halted channel restarts with the next issue_pending. */
		if (list_empty(&sc->issued))
			sc->aborting = false;
		spin_unlock_irq(&sc->lock);
		wake_up(&sc->idle_wq);
		cond_resched();
	}
	return 0;
}

/* Refuse to load unless bus addresses of our device are physical ones. */
static int softdma_identity(struct device *dev)
{
	struct page *page = alloc_page(GFP_KERNEL);
	dma_addr_t addr;
	int err = 0;

	if (!page)
		return -ENOMEM;
	addr = dma_map_page(dev, page, 0, PAGE_SIZE, DMA_BIDIRECTIONAL);
	if (dma_mapping_error(dev, addr)) {
		err = -ENODEV;
	} else {
		if (addr != page_to_phys(page))
			err = -ENODEV;
		dma_unmap_page(dev, addr, PAGE_SIZE, DMA_BIDIRECTIONAL);
	}
	__free_page(page);
	if (err)
		dev_err(dev, "bus addresses are not physical (IOMMU or bounce buffers): softdma cannot run here\n");
	return err;
}

static void softdma_stop_threads(struct softdma *sd)
{
	unsigned int i;

	for (i = 0; i < sd->nr; i++)
		if (sd->chans[i].thread)
			kthread_stop(sd->chans[i].thread);
}

static int softdma_init_chans(struct softdma *sd)
{
	struct dma_device *dma = &sd->dma;
	unsigned int i;

	INIT_LIST_HEAD(&dma->channels);
	for (i = 0; i < sd->nr; i++) {
		struct softdma_chan *sc = &sd->chans[i];

		sc->index = i;
		spin_lock_init(&sc->lock);
		INIT_LIST_HEAD(&sc->submitted);
		INIT_LIST_HEAD(&sc->issued);
		init_waitqueue_head(&sc->work_wq);
		init_waitqueue_head(&sc->idle_wq);
		sc->chan.device = dma;
		sc->chan.cookie = DMA_MIN_COOKIE;
		sc->chan.completed_cookie = DMA_MIN_COOKIE;
		list_add_tail(&sc->chan.device_node, &dma->channels);
		sc->thread = kthread_run(softdma_thread, sc, "softdma%u", i);
		if (IS_ERR(sc->thread)) {
			int err = PTR_ERR(sc->thread);

			sc->thread = NULL;
			return err;
		}
	}
	return 0;
}

static void softdma_init_device(struct softdma *sd)
{
	struct dma_device *dma = &sd->dma;

	dma_cap_zero(dma->cap_mask);
	dma_cap_set(DMA_MEMCPY, dma->cap_mask);
	dma->dev = &sd->pdev->dev;
	dma->copy_align = READ_ONCE(copy_align);
	dma->device_alloc_chan_resources = softdma_alloc_chan_resources;
	dma->device_free_chan_resources = softdma_free_chan_resources;
	dma->device_prep_dma_memcpy = softdma_prep_memcpy;
	dma->device_issue_pending = softdma_issue_pending;
	dma->device_tx_status = softdma_tx_status;
	dma->device_synchronize = softdma_synchronize;
	dma->device_terminate_all = softdma_terminate_all;
}

/*
 * dma_async_device_register() takes the provider module from the bound
 * driver, so the channels are registered from a platform driver's probe.
 */
static int softdma_probe(struct platform_device *pdev)
{
	struct softdma *sd;
	int err;

	sd = kzalloc(sizeof(*sd), GFP_KERNEL);
	if (!sd)
		return -ENOMEM;
	sd->nr = nr_channels;
	sd->pdev = pdev;
	err = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	/* Like I/OAT: one descriptor moves up to 1 MiB of contiguous memory. */
	dma_set_max_seg_size(&pdev->dev, SZ_1M);
	if (!err)
		err = softdma_identity(&pdev->dev);
	if (err)
		goto out_free;
	softdma_init_device(sd);
	err = softdma_init_chans(sd);
	if (err)
		goto out_threads;
	err = dma_async_device_register(&sd->dma);
	if (err)
		goto out_threads;
	softdma = sd;
	dev_info(&pdev->dev, "%u DMA_MEMCPY channels (test-only, CPU copies)\n",
		 sd->nr);
	return 0;

out_threads:
	softdma_stop_threads(sd);
out_free:
	kfree(sd);
	return err;
}

static struct platform_driver softdma_driver = {
	.probe = softdma_probe,
	.driver = {
		.name = "softdma",
		/* Teardown belongs to module exit: no unbinding from sysfs. */
		.suppress_bind_attrs = true,
	},
};

static struct platform_device *softdma_pdev;

static int __init softdma_init(void)
{
	int err;

	if (!nr_channels || nr_channels > SOFTDMA_MAX_CHANS)
		return -EINVAL;
	err = platform_driver_register(&softdma_driver);
	if (err)
		return err;
	softdma_pdev = platform_device_register_simple("softdma", -1, NULL, 0);
	err = PTR_ERR_OR_ZERO(softdma_pdev);
	if (!err && !softdma)
		err = -ENODEV;	/* probe failed, and said why */
	if (err) {
		if (!IS_ERR(softdma_pdev))
			platform_device_unregister(softdma_pdev);
		platform_driver_unregister(&softdma_driver);
	}
	return err;
}

static void __exit softdma_exit(void)
{
	dma_async_device_unregister(&softdma->dma);
	softdma_stop_threads(softdma);
	platform_device_unregister(softdma_pdev);
	platform_driver_unregister(&softdma_driver);
	kfree(softdma);
}

module_init(softdma_init);
module_exit(softdma_exit);
MODULE_DESCRIPTION("Test-only dmaengine DMA_MEMCPY provider run by kernel threads");
MODULE_AUTHOR("knemesis");
MODULE_LICENSE("GPL");
