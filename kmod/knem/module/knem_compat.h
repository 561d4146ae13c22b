/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel interfaces that differ between the kernels knem supports
 * (Debian 6.1 and 6.12).  Every version test lives here, behind a named
 * wrapper, so the rest of the module reads as plain current kernel code.
 */
#ifndef KNEM_COMPAT_H
#define KNEM_COMPAT_H

#include <linux/mm.h>
#include <linux/version.h>

/*
 * Long-term pins of user pages.  Both kernels provide pin_user_pages_fast()
 * with FOLL_LONGTERM (which migrates pages out of CMA/movable zones first);
 * the wrapper keeps the call sites independent of later signature changes.
 */
static inline long knem_pin_user_range(unsigned long start, int nr_pages,
				       bool writable, struct page **pages)
{
	unsigned int gup = FOLL_LONGTERM | (writable ? FOLL_WRITE : 0);

	return pin_user_pages_fast(start, nr_pages, gup, pages);
}

static inline void knem_unpin_pages(struct page **pages, unsigned long nr,
				    bool dirty)
{
	unpin_user_pages_dirty_lock(pages, nr, dirty);
}

/* vm_flags became read-only behind helpers in 6.3. */
static inline void knem_vma_flags_set(struct vm_area_struct *vma,
				      vm_flags_t flags)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

static inline void knem_vma_flags_clear(struct vm_area_struct *vma,
					vm_flags_t flags)
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 3, 0)
	vm_flags_clear(vma, flags);
#else
	vma->vm_flags &= ~flags;
#endif
}

#endif /* KNEM_COMPAT_H */
