// SPDX-License-Identifier: GPL-2.0
/*
 * Region attach (KNEM_FEATURE_ATTACH): a process maps a region it may copy
 * from into its own address space and moves data with loads and stores,
 * XPMEM-style, with no system call or page walk per message.
 *
 * ATTACH_REGION looks the cookie up as a copy does (same errors), keeps a
 * reference to the region in the file's attachment table and returns the
 * mmap offset of that entry: id << KNEM_ATTACH_OFFSET_SHIFT bytes, offset
 * 0 staying the status array.  mmap there maps the region's pinned pages
 * with remap_pfn_range(): a VM_PFNMAP mapping, because the pages are other
 * processes' anonymous memory and must not join this mapping's rmap.
 *
 * Lifetime: every VMA of such a mapping (fork and split copies included,
 * through vm_ops->open) holds its own reference to the region, so the
 * pages stay pinned, and hence allocated, until the last VMA is unmapped;
 * destroying the region or the creator's exit only unpublishes it.  A
 * mapping never points to freed memory; it shows the region's pages as
 * they are, the creator's later writes included.
 *
 * mmap checks the caller's euid against the region again (EPERM), as a
 * copy does: an attachment made by one user and mapped through the same
 * descriptor by another (a descriptor passed over a socket, or kept
 * across setuid()) maps nothing.
 *
 * The mapping gets at most the attachment's protection: PROT_WRITE needs a
 * PROT_WRITE attachment (of a PROT_WRITE region), VM_MAYWRITE is cleared
 * otherwise so mprotect() cannot add it, and PROT_EXEC is never allowed.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>

#include "knem_priv.h"
#include "knem_compat.h"

#define KNEM_ATTACH_OFFSET_SHIFT	32
#define KNEM_ATTACH_PGOFF_SHIFT		(KNEM_ATTACH_OFFSET_SHIFT - PAGE_SHIFT)
#define KNEM_ATTACH_MAX_ID		((1U << 30) - 1)

struct knem_attach {
	struct knem_region *region;	/* referenced */
	u32 prot;
};

/*
 * A mapping reads the region as one run of bytes only when its iovecs
 * join page to page: each one but the first starts a page, each one but
 * the last ends one.
 */
static bool knem_region_linear(const struct knem_pinned *pin)
{
	unsigned int i;

	for (i = 0; i < pin->nr_segs; i++) {
		const struct knem_seg *seg = &pin->segs[i];

		if (i > 0 && seg->offset)
			return false;
		if (i + 1 < pin->nr_segs &&
		    offset_in_page(seg->offset + seg->len))
			return false;
	}
	return true;
}

static int knem_attach_add(struct knem_ctx *ctx, struct knem_region *region,
			   u32 prot, u32 *id)
{
	struct knem_attach *att;
	int err;

	att = kmalloc(sizeof(*att), KNEM_GFP);
	if (!att)
		return -ENOMEM;
	att->region = region;
	att->prot = prot;
	err = xa_alloc(&ctx->attachments, id, att,
		       XA_LIMIT(1, KNEM_ATTACH_MAX_ID), KNEM_GFP);
	if (err) {
		kfree(att);
		return err == -EBUSY ? -ENOSPC : err;
	}
	return 0;
}

long knem_ioctl_attach(struct knem_ctx *ctx, void __user *arg)
{
	struct knem_cmd_attach_region ar;
	struct knem_region *region;
	u32 id;
	int err;

	if (copy_from_user(&ar, arg, sizeof(ar)))
		return -EFAULT;
	if (ar.flags || !(ar.protection & PROT_READ) ||
	    (ar.protection & ~KNEM_PROT_ALL))
		return -EINVAL;
	region = knem_region_get(ar.cookie, ar.protection);
	if (IS_ERR(region))
		return PTR_ERR(region);
	err = -EINVAL;
	if (!region->pin.nr_pages || !knem_region_linear(&region->pin))
		goto out_put;
	err = knem_attach_add(ctx, region, ar.protection, &id);
	if (err)
		goto out_put;
	ar.offset = (u64)id << KNEM_ATTACH_OFFSET_SHIFT;
	ar.map_length = (u64)region->pin.nr_pages << PAGE_SHIFT;
	ar.data_offset = region->pin.segs[0].offset;
	ar.data_length = region->pin.length;
	if (copy_to_user(arg, &ar, sizeof(ar))) {
		knem_detach(ctx, ar.offset);
		return -EFAULT;
	}
	return 0;

out_put:
	knem_region_put(region);
	return err;
}

/* Forget the attachment at @offset; its mappings keep their pages. */
int knem_detach(struct knem_ctx *ctx, u64 offset)
{
	struct knem_attach *att;

	if (offset & ((1ULL << KNEM_ATTACH_OFFSET_SHIFT) - 1))
		return -EINVAL;
	att = xa_erase(&ctx->attachments, offset >> KNEM_ATTACH_OFFSET_SHIFT);
	if (!att)
		return -EINVAL;
	knem_region_put(att->region);
	kfree(att);
	return 0;
}

void knem_attachments_release(struct knem_ctx *ctx)
{
	struct knem_attach *att;
	unsigned long id;

	xa_for_each(&ctx->attachments, id, att) {
		xa_erase(&ctx->attachments, id);
		knem_region_put(att->region);
		kfree(att);
	}
	xa_destroy(&ctx->attachments);
}

static void knem_vma_open(struct vm_area_struct *vma)
{
	struct knem_region *region = vma->vm_private_data;

	kref_get(&region->kref);
}

static void knem_vma_close(struct vm_area_struct *vma)
{
	knem_region_put(vma->vm_private_data);
}

static const struct vm_operations_struct knem_attach_vm_ops = {
	.open = knem_vma_open,
	.close = knem_vma_close,
};

/* Map pages [@first, @first + vma pages) of @region into @vma. */
static int knem_attach_remap(struct vm_area_struct *vma,
			     struct knem_region *region, unsigned long first)
{
	unsigned long addr, i = first;
	int err;

	for (addr = vma->vm_start; addr < vma->vm_end; addr += PAGE_SIZE) {
		err = remap_pfn_range(vma, addr,
				      page_to_pfn(region->pin.pages[i++]),
				      PAGE_SIZE, vma->vm_page_prot);
		if (err)
			return err;
	}
	return 0;
}

/* mmap at a non-zero offset: an attachment. */
int knem_attach_mmap(struct knem_ctx *ctx, struct vm_area_struct *vma)
{
	unsigned long id = vma->vm_pgoff >> KNEM_ATTACH_PGOFF_SHIFT;
	unsigned long first = vma->vm_pgoff &
			      ((1UL << KNEM_ATTACH_PGOFF_SHIFT) - 1);
	unsigned long pages = vma_pages(vma);
	struct knem_region *region = NULL;
	struct knem_attach *att;
	u32 prot = 0;
	int err;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	xa_lock(&ctx->attachments);
	att = xa_load(&ctx->attachments, id);
	if (att) {
		region = att->region;
		prot = att->prot;
		kref_get(&region->kref);
	}
	xa_unlock(&ctx->attachments);
	if (!region)
		return -EINVAL;
	/*
	 * The caller now, not the one who attached: the descriptor may have
	 * been passed on, or its process may have dropped privileges since.
	 */
	err = knem_region_access(region);
	if (err)
		goto out_put;
	err = -EACCES;
	if ((vma->vm_flags & VM_EXEC) ||
	    ((vma->vm_flags & VM_WRITE) && !(prot & PROT_WRITE)))
		goto out_put;
	err = -EINVAL;
	/* A destroyed region maps no more; existing mappings keep it. */
	if (!atomic_read(&region->linked) || first >= region->pin.nr_pages ||
	    pages > region->pin.nr_pages - first)
		goto out_put;
	knem_vma_flags_clear(vma, VM_MAYEXEC |
			     (prot & PROT_WRITE ? 0 : VM_MAYWRITE));
	knem_vma_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP);
	err = knem_attach_remap(vma, region, first);
	if (err)
		goto out_put;
	vma->vm_private_data = region;
	vma->vm_ops = &knem_attach_vm_ops;
	return 0;

out_put:
	knem_region_put(region);
	return err;
}
