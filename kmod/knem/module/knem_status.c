// SPDX-License-Identifier: GPL-2.0
/*
 * The status array: one knem_status_t per slot, allocated by the driver
 * when the user maps the device at offset 0, so that asynchronous copies
 * (kthread or DMA engine) report completion with a store the user polls.
 * One mapping per file; its length (page-rounded) is the slot count.
 *
 * NOTIFY_FD: completed slot indexes of flagged asynchronous copies are also
 * queued on the file; read() returns them as u32s, poll() waits for them.
 * A submission first reserves its place in the queue, so a completion can
 * never find the queue full.
 */
#include <linux/vmalloc.h>
#include <linux/mm.h>
#include <linux/uaccess.h>
#include <linux/fs.h>

#include "knem_priv.h"
#include "knem_compat.h"

#define KNEM_NOTIFY_DEPTH	4096

int knem_status_mmap(struct knem_ctx *ctx, struct vm_area_struct *vma)
{
	unsigned long size = vma->vm_end - vma->vm_start;
	knem_status_t *status;
	int err;

	if (vma->vm_pgoff || !(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if ((u64)size > (1ULL << 32) / sizeof(knem_status_t))
		return -EINVAL;
	if (size > knem_max_status_slots * sizeof(knem_status_t))
		return -ENOMEM;

	mutex_lock(&ctx->lock);
	err = -EBUSY;
	if (ctx->status)
		goto out;
	err = -ENOMEM;
	status = vmalloc_user(size);
	if (!status)
		goto out;
	err = remap_vmalloc_range(vma, status, 0);
	if (err) {
		vfree(status);
		goto out;
	}
	ctx->status_slots = size / sizeof(knem_status_t);
	/* Pairs with the acquire in knem_status_check(). */
	smp_store_release(&ctx->status, status);
out:
	mutex_unlock(&ctx->lock);
	return err;
}

int knem_status_check(struct knem_ctx *ctx, u32 index)
{
	if (!smp_load_acquire(&ctx->status) || index >= ctx->status_slots)
		return -EINVAL;
	return 0;
}

void knem_status_set(struct knem_ctx *ctx, u32 index, knem_status_t value)
{
	/* The data written before must be visible before the status. */
	smp_wmb();
	WRITE_ONCE(ctx->status[index], value);
}

void knem_status_free(struct knem_ctx *ctx)
{
	vfree(ctx->status);
	kfifo_free(&ctx->notify);
}

int knem_notify_init(struct knem_ctx *ctx)
{
	spin_lock_init(&ctx->notify_lock);
	init_waitqueue_head(&ctx->notify_wq);
	atomic_set(&ctx->notify_reserved, 0);
	return kfifo_alloc(&ctx->notify, KNEM_NOTIFY_DEPTH, GFP_KERNEL);
}

bool knem_notify_reserve(struct knem_ctx *ctx)
{
	if (atomic_inc_return(&ctx->notify_reserved) > KNEM_NOTIFY_DEPTH) {
		atomic_dec(&ctx->notify_reserved);
		return false;
	}
	return true;
}

void knem_notify_unreserve(struct knem_ctx *ctx)
{
	atomic_dec(&ctx->notify_reserved);
}

void knem_notify_push(struct knem_ctx *ctx, u32 index)
{
	unsigned long flags;

	spin_lock_irqsave(&ctx->notify_lock, flags);
	kfifo_put(&ctx->notify, index);
	spin_unlock_irqrestore(&ctx->notify_lock, flags);
	wake_up_interruptible_poll(&ctx->notify_wq, EPOLLIN | EPOLLRDNORM);
}

static bool knem_notify_pending(struct knem_ctx *ctx)
{
	return !kfifo_is_empty(&ctx->notify);
}

ssize_t knem_notify_read(struct knem_ctx *ctx, struct file *file,
			 char __user *buf, size_t count)
{
	u32 batch[64];
	unsigned int n;
	int err;

	if (count < sizeof(u32))
		return -EINVAL;
	if (!knem_notify_pending(ctx)) {
		if (file->f_flags & O_NONBLOCK)
			return -EAGAIN;
		err = wait_event_interruptible(ctx->notify_wq,
					       knem_notify_pending(ctx));
		if (err)
			return err;
	}
	count = min_t(size_t, count / sizeof(u32), ARRAY_SIZE(batch));
	spin_lock_irq(&ctx->notify_lock);
	n = kfifo_out(&ctx->notify, batch, count);
	spin_unlock_irq(&ctx->notify_lock);
	atomic_sub(n, &ctx->notify_reserved);
	if (copy_to_user(buf, batch, n * sizeof(u32)))
		return -EFAULT;
	return n * sizeof(u32);
}

__poll_t knem_notify_poll(struct knem_ctx *ctx, struct file *file,
			  poll_table *wait)
{
	poll_wait(file, &ctx->notify_wq, wait);
	return knem_notify_pending(ctx) ? EPOLLIN | EPOLLRDNORM : 0;
}
