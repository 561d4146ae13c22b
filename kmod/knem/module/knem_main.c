// SPDX-License-Identifier: GPL-2.0
/*
 * knem - a KNEM ABI 0xd compatible single-copy engine for intra-node MPI
 * large messages (Goglin and Moreaud, "KNEM: a generic and scalable
 * kernel-assisted intra-node MPI communication framework", 2013):
 * /dev/knem, its file operations and the ioctl dispatch.  See ../README.md
 * for parameters and semantics.
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/sched.h>
#include <linux/cred.h>
#include <linux/compat.h>
#include <linux/sizes.h>

#include "knem_priv.h"

#define CREATE_TRACE_POINTS
#include "knem_trace.h"

unsigned int knem_max_iovecs = 1024;
module_param_named(max_iovecs, knem_max_iovecs, uint, 0644);
MODULE_PARM_DESC(max_iovecs, "Most iovecs in one region or local list (1024)");

/*
 * Registration caches keep tens of thousands of regions per process (the
 * ABI's clients); an empty region pins nothing, so this is what bounds a
 * user that floods the table with them.
 */
unsigned long knem_max_user_regions = 1UL << 17;
module_param_named(max_user_regions, knem_max_user_regions, ulong, 0644);
MODULE_PARM_DESC(max_user_regions,
		 "Most live regions of one user, all files together (131072)");

unsigned int knem_max_queued_copies = 1U << 16;
module_param_named(max_queued_copies, knem_max_queued_copies, uint, 0644);
MODULE_PARM_DESC(max_queued_copies,
		 "Most asynchronous copies one file has queued or in flight (65536)");

unsigned long knem_max_status_slots = 1UL << 24;
module_param_named(max_status_slots, knem_max_status_slots, ulong, 0644);
MODULE_PARM_DESC(max_status_slots, "Largest status array mapping, in slots (16M)");

unsigned int knem_dma_timeout_ms = 10000;
module_param_named(dma_timeout_ms, knem_dma_timeout_ms, uint, 0644);
MODULE_PARM_DESC(dma_timeout_ms,
		 "A DMA copy not done after this long is stopped and fails (10000)");

/* A channel count or a piece size, checked against [min, max]. */
static int knem_param_set_range(const char *val, const struct kernel_param *kp,
				unsigned int min, unsigned int max)
{
	unsigned int v;
	int err = kstrtouint(val, 0, &v);

	if (err)
		return err;
	if (v < min || v > max)
		return -EINVAL;
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

static int knem_set_dma_channels(const char *val,
				 const struct kernel_param *kp)
{
	return knem_param_set_range(val, kp, 0, KNEM_MAX_DMA_CHANS);
}

static const struct kernel_param_ops knem_dma_channels_ops = {
	.set = knem_set_dma_channels,
	.get = param_get_uint,
};

unsigned int knem_dma_channels;
module_param_cb(dma_channels, &knem_dma_channels_ops, &knem_dma_channels,
		0644);
MODULE_PARM_DESC(dma_channels,
		 "Most DMA channels one copy is split over, 0 = all (0, max "
		 __stringify(KNEM_MAX_DMA_CHANS) ")");

static int knem_set_dma_split_min(const char *val,
				  const struct kernel_param *kp)
{
	return knem_param_set_range(val, kp, PAGE_SIZE, SZ_1G);
}

static const struct kernel_param_ops knem_dma_split_min_ops = {
	.set = knem_set_dma_split_min,
	.get = param_get_uint,
};

unsigned int knem_dma_split_min = SZ_64K;
module_param_cb(dma_split_min, &knem_dma_split_min_ops, &knem_dma_split_min,
		0644);
MODULE_PARM_DESC(dma_split_min,
		 "Least bytes each channel gets when a DMA copy is split, page size to 1 GiB (65536)");

bool knem_dma_enable = true;
module_param_named(dma, knem_dma_enable, bool, 0444);
MODULE_PARM_DESC(dma, "Use dmaengine DMA_MEMCPY channels when asked (1)");

/*
 * A read-only file only reads statistics: it gets no status array, no
 * notification ring and no offload mask, and every ioctl fails (EBADF).
 */
static int knem_open(struct inode *inode, struct file *file)
{
	struct knem_ctx *ctx = kzalloc(sizeof(*ctx), KNEM_GFP);

	if (!ctx)
		return -ENOMEM;
	if ((file->f_mode & FMODE_WRITE) &&
	    !zalloc_cpumask_var(&ctx->offload_cpus, KNEM_GFP)) {
		kfree(ctx);
		return -ENOMEM;
	}
	kref_init(&ctx->kref);
	ctx->tgid = current->tgid;
	spin_lock_init(&ctx->regions_lock);
	INIT_LIST_HEAD(&ctx->regions);
	atomic_long_set(&ctx->pinned_pages, 0);
	mutex_init(&ctx->lock);
	spin_lock_init(&ctx->offload_lock);
	ctx->offload_last = -1;
	atomic_set(&ctx->inflight, 0);
	init_waitqueue_head(&ctx->inflight_wq);
	spin_lock_init(&ctx->queue_lock);
	INIT_LIST_HEAD(&ctx->queue);
	spin_lock_init(&ctx->dma_chans_lock);
	xa_init_flags(&ctx->attachments, XA_FLAGS_ALLOC1);
	knem_notify_init(ctx);
	file->private_data = ctx;
	return 0;
}

/*
 * Close (also at process exit): unpublish this file's regions, cancel its
 * queued asynchronous copies and wait for the one in flight, which stops
 * at its next page (a DMA wait is bounded by dma_timeout_ms), so that
 * nothing it pinned outlives it except pages another file's copy still
 * has in flight.
 */
static int knem_release(struct inode *inode, struct file *file)
{
	struct knem_ctx *ctx = file->private_data;

	knem_offload_cancel(ctx);
	knem_attachments_release(ctx);
	knem_regions_release(ctx);
	wait_event(ctx->inflight_wq, !atomic_read(&ctx->inflight));
	knem_dma_ctx_sync(ctx);
	knem_ctx_put(ctx);
	return 0;
}

static long knem_get_info(void __user *arg)
{
	struct knem_cmd_info info = {
		.abi = KNEM_ABI_VERSION,
		.features = KNEM_FEATURE_ATTACH | KNEM_FEATURE_INVALIDATE |
			    (knem_dma_usable() ? KNEM_FEATURE_DMA : 0),
	};

	if (!(info.features & KNEM_FEATURE_DMA))
		info.ignored_flags = KNEM_FLAG_DMA | KNEM_FLAG_ASYNCDMACOMPLETE |
				     KNEM_FLAG_DMATHREAD;
	return copy_to_user(arg, &info, sizeof(info)) ? -EFAULT : 0;
}

static long knem_ioctl_create(struct knem_ctx *ctx, void __user *arg)
{
	struct knem_cmd_create_region cr;
	knem_cookie_t cookie;
	int err;

	if (copy_from_user(&cr, arg, sizeof(cr)))
		return -EFAULT;
	err = knem_region_create(ctx, cr.iovec_array, cr.iovec_nr, cr.flags,
				 cr.protection, cr.invalidate_status, &cookie);
	if (err)
		return err;
	if (put_user(cookie, (u64 __user *)(arg +
		     offsetof(struct knem_cmd_create_region, cookie))))
		goto fault;
	return 0;
fault:
	knem_region_destroy(ctx, cookie);
	return -EFAULT;
}

/* Old API: a send buffer is a read-only region consumed by one receive. */
static long knem_ioctl_init_send(struct knem_ctx *ctx, void __user *arg)
{
	struct knem_cmd_init_send_param is;
	knem_cookie_t cookie;
	int err;

	if (copy_from_user(&is, arg, sizeof(is)))
		return -EFAULT;
	if (is.flags & ~KNEM_FLAGS_ALL)
		return -EINVAL;
	err = knem_region_create(ctx, is.send_iovec_array, is.send_iovec_nr,
				 (is.flags & KNEM_FLAG_ANY_USER_ACCESS) |
				 KNEM_FLAG_SINGLEUSE, PROT_READ, 0, &cookie);
	if (err)
		return err;
	if (put_user(cookie, (u64 __user *)(arg +
		     offsetof(struct knem_cmd_init_send_param, send_cookie)))) {
		knem_region_destroy(ctx, cookie);
		return -EFAULT;
	}
	return 0;
}

static long knem_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct knem_ctx *ctx = file->private_data;
	void __user *uarg = (void __user *)arg;
	knem_cookie_t cookie;

	if (!(file->f_mode & FMODE_WRITE))
		return -EBADF;
	switch (cmd) {
	case KNEM_CMD_GET_INFO:
		return knem_get_info(uarg);
	case KNEM_CMD_BIND_OFFLOAD:
		return knem_bind_offload(ctx, uarg);
	case KNEM_CMD_CREATE_REGION:
		return knem_ioctl_create(ctx, uarg);
	case KNEM_CMD_DESTROY_REGION:
		if (get_user(cookie, (u64 __user *)uarg))
			return -EFAULT;
		return knem_region_destroy(ctx, cookie);
	case KNEM_CMD_INIT_SEND:
		return knem_ioctl_init_send(ctx, uarg);
	case KNEM_CMD_ATTACH_REGION:
		return knem_ioctl_attach(ctx, uarg);
	case KNEM_CMD_DETACH_REGION:
		if (get_user(cookie, (u64 __user *)uarg))
			return -EFAULT;
		return knem_detach(ctx, cookie);
	case KNEM_CMD_COPY:
	case KNEM_CMD_COPY_BOUNDED:
	case KNEM_CMD_INLINE_COPY:
	case KNEM_CMD_INLINE_COPY_BOUNDED:
	case KNEM_CMD_SYNC_RECV:
	case KNEM_CMD_INIT_ASYNC_RECV:
		return knem_ioctl_copy(ctx, cmd, uarg);
	}
	return -ENOSYS;
}

static int knem_mmap(struct file *file, struct vm_area_struct *vma)
{
	if (!(file->f_mode & FMODE_WRITE))
		return -EBADF;
	if (vma->vm_pgoff)
		return knem_attach_mmap(file->private_data, vma);
	return knem_status_mmap(file->private_data, vma);
}

/* Read-only files read statistics; others read NOTIFY_FD completions. */
static ssize_t knem_read(struct file *file, char __user *buf, size_t count,
			 loff_t *ppos)
{
	struct knem_ctx *ctx = file->private_data;

	if (!(file->f_mode & FMODE_WRITE))
		return knem_stats_read(ctx, buf, count, ppos);
	return knem_notify_read(ctx, file, buf, count);
}

static __poll_t knem_poll(struct file *file, poll_table *wait)
{
	struct knem_ctx *ctx = file->private_data;

	if (!(file->f_mode & FMODE_WRITE))
		return EPOLLIN | EPOLLRDNORM;
	return knem_notify_poll(ctx, file, wait);
}

static const struct file_operations knem_fops = {
	.owner = THIS_MODULE,
	.open = knem_open,
	.release = knem_release,
	.unlocked_ioctl = knem_ioctl,
	/* Every structure is 64-bit clean: only the pointer needs widening. */
	.compat_ioctl = compat_ptr_ioctl,
	.mmap = knem_mmap,
	.read = knem_read,
	.poll = knem_poll,
	.llseek = noop_llseek,
};

static struct miscdevice knem_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = KNEM_DEVICE_NAME,
	.fops = &knem_fops,
	.mode = 0666,
};

static int __init knem_init(void)
{
	int err;

	err = knem_regions_init();
	if (err)
		return err;
	err = knem_offload_init();
	if (err)
		goto out_regions;
	err = knem_dma_init();
	if (err)
		goto out_offload;
	err = misc_register(&knem_miscdev);
	if (err)
		goto out_dma;
	pr_info("knem: ABI 0x%x, /dev/%s ready, DMA %s\n", KNEM_ABI_VERSION,
		KNEM_DEVICE_NAME, knem_dma_usable() ? "available" : "absent");
	return 0;

out_dma:
	knem_dma_exit();
out_offload:
	knem_offload_exit();
out_regions:
	knem_regions_exit();
	return err;
}

static void __exit knem_exit(void)
{
	misc_deregister(&knem_miscdev);
	knem_dma_exit();
	knem_offload_exit();
	/* Regions freed by kfree_rcu() may still hold pins and user counts. */
	rcu_barrier();
	knem_regions_exit();
	knem_users_exit();
	WARN_ON(knem_pinned_total());
}

module_init(knem_init);
module_exit(knem_exit);
MODULE_DESCRIPTION("KNEM ABI 0xd compatible intra-node single-copy engine");
MODULE_AUTHOR("knemesis");
MODULE_LICENSE("GPL");
