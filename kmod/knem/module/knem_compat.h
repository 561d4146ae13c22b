/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel interfaces that differ between the kernels knem supports
 * (Debian 6.1 and 6.12).  Every version test lives here, behind a named
 * wrapper, so the rest of the module reads as plain current kernel code.
 */
#ifndef KNEM_COMPAT_H
#define KNEM_COMPAT_H

#include <linux/mm.h>

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

#endif /* KNEM_COMPAT_H */
