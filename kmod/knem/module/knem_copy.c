// SPDX-License-Identifier: GPL-2.0
/*
 * The copy commands (COPY, INLINE_COPY, their BOUNDED forms and the old
 * SYNC_RECV / INIT_ASYNC_RECV) share one path: decode the command into a
 * knem_copy_args, check it, build a knem_xfer and hand it to an engine.
 *
 * A copy either finishes inside the ioctl (current_status SUCCESS or FAILED)
 * or returns PENDING, in which case its status slot is written later and,
 * with NOTIFY_FD, its index queued on the file.  A copy asked to be
 * asynchronous that finishes inside the ioctl anyway (zero length, or DMA
 * unusable) also writes its final status to its slot, so that a client
 * that only watches the slot never waits for a PENDING that stays.
 * NOTIFY_FD copies always go through a worker and are always notified.
 */
#include <linux/slab.h>
#include <linux/mman.h>
#include <linux/uaccess.h>
#include <linux/sched.h>

#include "knem_priv.h"
#include "knem_trace.h"

struct knem_copy_args {
	bool is_inline;
	bool write;		/* inline: local -> remote */
	bool slot_always;	/* INIT_ASYNC_RECV: status only via the slot */
	u64 local_iovecs;
	u32 local_nr;
	knem_cookie_t src_cookie;	/* remote cookie for inline copies */
	knem_cookie_t dst_cookie;
	u64 src_off;
	u64 dst_off;
	u64 length;		/* U64_MAX for the unbounded commands */
	u32 flags;
	u32 status_index;
	u32 current_status;	/* out */
};

static void knem_xfer_account(struct knem_xfer *xfer, enum knem_engine eng,
			      int err)
{
	knem_stat_add(KNEM_STAT_COPIES_CPU + eng, 1);
	knem_stat_add(KNEM_STAT_BYTES_CPU + eng, err ? 0 : xfer->length);
	if (err)
		knem_stat_add(KNEM_STAT_COPIES_FAILED, 1);
	trace_knem_copy(err ? 0 : xfer->length, eng, xfer->tgid);
}

static void knem_xfer_free(struct knem_xfer *xfer)
{
	if (xfer->src)
		knem_region_put(xfer->src);
	if (xfer->dst)
		knem_region_put(xfer->dst);
	if (xfer->user_iov)
		knem_iovecs_free(xfer->user_iov, xfer->fast_iov);
	if (xfer->on_heap)
		kfree(xfer);
}

/*
 * Result of an asynchronous copy, in process context (a worker of the
 * offload workqueues): its status slot, its NOTIFY_FD index, statistics.
 */
void knem_xfer_report(struct knem_xfer *xfer, int err, enum knem_engine eng)
{
	struct knem_ctx *ctx = xfer->ctx;

	knem_status_set(ctx, xfer->status_index,
			err ? KNEM_STATUS_FAILED : KNEM_STATUS_SUCCESS);
	if (xfer->flags & KNEM_FLAG_NOTIFY_FD)
		knem_notify_push(ctx, xfer->status_index);
	if (xfer->length)
		knem_xfer_account(xfer, eng, err);
}

/* The end of a reported asynchronous copy: pages, counts, the file. */
void knem_xfer_release(struct knem_xfer *xfer)
{
	struct knem_ctx *ctx = xfer->ctx;

	knem_xfer_free(xfer);
	if (atomic_dec_and_test(&ctx->inflight))
		wake_up(&ctx->inflight_wq);
	knem_ctx_put(ctx);
}

/* Resolve both sides into @xfer; the local side is pinned when needed. */
static int knem_xfer_sides(struct knem_ctx *ctx, struct knem_copy_args *a,
			   struct knem_xfer *x, bool pin_local)
{
	struct knem_region *remote, *local = NULL;
	struct iovec *iov = NULL;
	u64 local_len, remote_left;
	int err;

	if (a->is_inline) {
		if (pin_local) {
			local = knem_region_alloc(ctx, 0, 0);
			if (!local)
				return -ENOMEM;
			err = knem_pin_iovecs(ctx, a->local_iovecs, a->local_nr,
					      !a->write, &local->pin);
			if (err)
				goto out_local;
			local_len = local->pin.length;
		} else {
			err = knem_iovecs_import(a->local_iovecs, a->local_nr,
						 x->fast_iov, &iov, &local_len);
			if (err)
				return err;
		}
		remote = knem_region_lookup(a->src_cookie,
					    a->write ? PROT_WRITE : PROT_READ);
		if (IS_ERR(remote)) {
			err = PTR_ERR(remote);
			goto out_local;
		}
		remote_left = knem_bytes_after(remote->pin.length, a->src_off);
		x->length = min3(remote_left, local_len, a->length);
		if (a->write) {
			x->src = local;
			x->dst = remote;
			x->dst_off = a->src_off;
		} else {
			x->src = remote;
			x->dst = local;
			x->src_off = a->src_off;
		}
		if (!pin_local) {
			x->has_user_iter = true;
			x->user_is_dst = !a->write;
			iov_iter_init(&x->user_iter,
				      a->write ? ITER_SOURCE : ITER_DEST,
				      iov, a->local_nr, x->length);
			x->user_iov = iov;
		}
		return 0;
	}

	x->src = knem_region_lookup(a->src_cookie, PROT_READ);
	if (IS_ERR(x->src)) {
		err = PTR_ERR(x->src);
		x->src = NULL;
		return err;
	}
	x->dst = knem_region_lookup(a->dst_cookie, PROT_WRITE);
	if (IS_ERR(x->dst)) {
		err = PTR_ERR(x->dst);
		x->dst = NULL;
		return err;
	}
	x->src_off = a->src_off;
	x->dst_off = a->dst_off;
	x->length = min3(knem_bytes_after(x->src->pin.length, a->src_off),
			 knem_bytes_after(x->dst->pin.length, a->dst_off),
			 a->length);
	return 0;

out_local:
	if (iov)
		knem_iovecs_free(iov, x->fast_iov);
	if (local)
		knem_region_put(local);
	return err;
}

/*
 * NOTIFY_FD as KNEM 1.1 accepts it: only for copies completed by a worker
 * (MEMCPYTHREAD or DMATHREAD), never with ASYNCDMACOMPLETE.
 */
static bool knem_notify_flags_ok(u32 flags)
{
	if (!(flags & KNEM_FLAG_NOTIFY_FD))
		return true;
	return (flags & (KNEM_FLAG_MEMCPYTHREAD | KNEM_FLAG_DMATHREAD)) &&
	       !(flags & KNEM_FLAG_ASYNCDMACOMPLETE);
}

/*
 * Hand @sync_x, both sides pinned, to a worker: the ioctl returns PENDING.
 * A file queues at most max_queued_copies copies (EBUSY beyond: a client
 * that never waits must not fill the kernel with requests).  Nothing can
 * fail once the copy is queued.
 */
static int knem_xfer_start_async(struct knem_ctx *ctx,
				 struct knem_xfer *sync_x, bool use_dma)
{
	bool notify = sync_x->flags & KNEM_FLAG_NOTIFY_FD;
	struct knem_xfer *x;
	int err;

	/* No ioctl runs once release began: nobody waits for zero here. */
	if (atomic_inc_return(&ctx->inflight) >
	    (int)READ_ONCE(knem_max_queued_copies)) {
		err = -EBUSY;
		goto out_inflight;
	}
	if (notify) {
		err = knem_notify_reserve(ctx);
		if (err)
			goto out_inflight;
	}
	/* No pointer into sync_x remains: the user_iter side is unused. */
	err = -ENOMEM;
	x = kmemdup(sync_x, sizeof(*x), KNEM_GFP);
	if (!x)
		goto out_notify;
	x->on_heap = true;
	/* The references to the sides now belong to x. */
	sync_x->src = NULL;
	sync_x->dst = NULL;
	knem_status_set(ctx, x->status_index, KNEM_STATUS_PENDING);
	knem_ctx_get(ctx);
	knem_offload_submit(x, use_dma);
	return 0;

out_notify:
	if (notify)
		knem_notify_unreserve(ctx);
out_inflight:
	atomic_dec(&ctx->inflight);
	return err;
}

static int knem_do_copy(struct knem_ctx *ctx, struct knem_copy_args *a)
{
	bool use_dma, async, pin_local;
	struct knem_xfer sync_x, *x = &sync_x;
	int err;

	if ((a->flags & ~KNEM_FLAGS_ALL) || !knem_notify_flags_ok(a->flags))
		return -EINVAL;
	use_dma = (a->flags & KNEM_FLAG_DMA) && knem_dma_usable();
	async = use_dma ? a->flags & (KNEM_FLAG_ASYNCDMACOMPLETE |
				      KNEM_FLAG_DMATHREAD) :
			  a->flags & KNEM_FLAG_MEMCPYTHREAD;
	if (async || a->slot_always) {
		err = knem_status_check(ctx, a->status_index);
		if (err)
			return err;
		a->slot_always = true;
	}
	pin_local = async || use_dma || (a->flags & KNEM_FLAG_PINLOCAL);

	memset(x, 0, sizeof(*x));
	x->ctx = ctx;
	x->flags = a->flags;
	x->status_index = a->status_index;
	x->tgid = current->tgid;
	err = knem_xfer_sides(ctx, a, x, pin_local);
	if (err)
		goto out_free;

	if (async && (x->length || (a->flags & KNEM_FLAG_NOTIFY_FD))) {
		err = knem_xfer_start_async(ctx, x, use_dma);
		if (err)
			goto out_free;
		a->current_status = KNEM_STATUS_PENDING;
		goto out_free;
	}

	if (!x->length)
		err = 0;
	else if (use_dma)
		err = knem_dma_copy(x, true);
	else
		err = knem_cpu_copy(x);
	/* A fault on the caller's own unpinned buffer is an argument error. */
	if (err == -EFAULT)
		goto out_free;
	a->current_status = err ? KNEM_STATUS_FAILED : KNEM_STATUS_SUCCESS;
	if (a->slot_always)
		knem_status_set(ctx, a->status_index, a->current_status);
	if (x->length)
		knem_xfer_account(x, x->engine, err);
	/* A copy stopped by a fatal signal: the dying caller gets EINTR. */
	if (err != -EINTR)
		err = 0;
out_free:
	knem_xfer_free(x);
	return err;
}

static int knem_copy_decode(unsigned int cmd, void __user *arg,
			    struct knem_copy_args *a)
{
	union {
		struct knem_cmd_copy c;
		struct knem_cmd_copy_bounded cb;
		struct knem_cmd_inline_copy ic;
		struct knem_cmd_inline_copy_bounded icb;
		struct knem_cmd_sync_recv_param sr;
		struct knem_cmd_init_async_recv_param ar;
	} u;

	if (copy_from_user(&u, arg, _IOC_SIZE(cmd)))
		return -EFAULT;
	memset(a, 0, sizeof(*a));
	a->length = U64_MAX;
	switch (cmd) {
	case KNEM_CMD_COPY_BOUNDED:
		a->length = u.cb.length;
		fallthrough;
	case KNEM_CMD_COPY:
		/* copy and copy_bounded agree up to dst_offset. */
		a->src_cookie = u.c.src_cookie;
		a->src_off = u.c.src_offset;
		a->dst_cookie = u.c.dst_cookie;
		a->dst_off = u.c.dst_offset;
		a->flags = cmd == KNEM_CMD_COPY ? u.c.flags : u.cb.flags;
		a->status_index = cmd == KNEM_CMD_COPY ?
			u.c.async_status_index : u.cb.async_status_index;
		return 0;
	case KNEM_CMD_INLINE_COPY_BOUNDED:
		a->length = u.icb.length;
		fallthrough;
	case KNEM_CMD_INLINE_COPY:
		a->is_inline = true;
		a->local_iovecs = u.ic.local_iovec_array;
		a->local_nr = u.ic.local_iovec_nr;
		if (u.ic.write > 1)
			return -EINVAL;
		a->write = u.ic.write;
		a->src_cookie = u.ic.remote_cookie;
		a->src_off = u.ic.remote_offset;
		a->flags = cmd == KNEM_CMD_INLINE_COPY ? u.ic.flags : u.icb.flags;
		a->status_index = cmd == KNEM_CMD_INLINE_COPY ?
			u.ic.async_status_index : u.icb.async_status_index;
		return 0;
	case KNEM_CMD_SYNC_RECV:
		a->is_inline = true;
		a->local_iovecs = u.sr.recv_iovec_array;
		a->local_nr = u.sr.recv_iovec_nr;
		a->src_cookie = u.sr.send_cookie;
		/* The old receive is synchronous whatever the flags say. */
		a->flags = u.sr.flags & ~(KNEM_FLAG_ASYNCDMACOMPLETE |
					  KNEM_FLAG_DMATHREAD |
					  KNEM_FLAG_MEMCPYTHREAD |
					  KNEM_FLAG_NOTIFY_FD);
		return 0;
	case KNEM_CMD_INIT_ASYNC_RECV:
		a->is_inline = true;
		a->slot_always = true;
		a->local_iovecs = u.ar.recv_iovec_array;
		a->local_nr = u.ar.recv_iovec_nr;
		a->src_cookie = u.ar.send_cookie;
		a->status_index = u.ar.status_index;
		a->flags = u.ar.flags;
		return 0;
	}
	return -ENOSYS;
}

/* Offset of current_status (or status) in each command's structure. */
static size_t knem_status_offset(unsigned int cmd)
{
	switch (cmd) {
	case KNEM_CMD_COPY:
		return offsetof(struct knem_cmd_copy, current_status);
	case KNEM_CMD_COPY_BOUNDED:
		return offsetof(struct knem_cmd_copy_bounded, current_status);
	case KNEM_CMD_INLINE_COPY:
		return offsetof(struct knem_cmd_inline_copy, current_status);
	case KNEM_CMD_INLINE_COPY_BOUNDED:
		return offsetof(struct knem_cmd_inline_copy_bounded,
				current_status);
	case KNEM_CMD_SYNC_RECV:
		return offsetof(struct knem_cmd_sync_recv_param, status);
	}
	return 0;
}

long knem_ioctl_copy(struct knem_ctx *ctx, unsigned int cmd,
		     void __user *arg)
{
	struct knem_copy_args a;
	size_t off;
	int err;

	err = knem_copy_decode(cmd, arg, &a);
	if (err)
		return err;
	err = knem_do_copy(ctx, &a);
	if (err)
		return err;
	off = knem_status_offset(cmd);
	if (off && put_user(a.current_status, (u32 __user *)(arg + off)))
		return -EFAULT;
	return 0;
}
