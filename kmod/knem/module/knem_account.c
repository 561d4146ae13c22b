// SPDX-License-Identifier: GPL-2.0
/*
 * Resource accounting: what bounds a user of the 0666 device.
 *
 * KNEM puts no per-descriptor cap on regions (registration caches keep tens
 * of thousands alive for a whole job), so knem bounds what a user holds the
 * way the rest of the kernel does:
 *
 *  - pinned pages are charged to the user who pinned them
 *    (user_struct->locked_vm, as io_uring and AF_XDP do) and checked
 *    against the pinning task's RLIMIT_MEMLOCK, unless it has
 *    CAP_IPC_LOCK; over the limit is ENOMEM.  The charge is taken before
 *    the pages are pinned and returned when they are unpinned, whoever
 *    holds them by then: an attachment or a copy in flight that outlives
 *    the creator keeps the creator's user charged.  A per-process counter
 *    (mm->pinned_vm) would not do: a process that exits takes its counter
 *    with it while another one still holds its pages, and every process of
 *    a user would get a limit of its own;
 *  - every allocation made for a caller is charged to its memory cgroup
 *    and may fail (KNEM_GFP: ENOMEM, never the OOM killer);
 *  - live regions are counted per creating euid against the
 *    max_user_regions module parameter; over it is ENOSPC.
 *
 * The per-user region counters live in an xarray indexed by the uid; an
 * entry is made on a uid's first region and kept until the module unloads
 * (only a privileged process can take new uids, so the table stays small).
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/xarray.h>

#include "knem_priv.h"

struct knem_user {
	atomic_long_t regions;
};

static DEFINE_XARRAY(knem_users);

/*
 * Charge @pages pages, about to be pinned, to the calling user.  The
 * charge is made (or refused) in one compare-and-exchange, so concurrent
 * pins of one user never pass the limit together.  On success *@userp is
 * the charged user, referenced, or NULL when CAP_IPC_LOCK exempts the
 * caller; knem_lock_uncharge() takes both back.
 */
int knem_lock_charge(unsigned long pages, struct user_struct **userp)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct user_struct *user;
	long cur, next;

	*userp = NULL;
	if (!pages || capable(CAP_IPC_LOCK))
		return 0;
	user = get_current_user();
	cur = atomic_long_read(&user->locked_vm);
	do {
		next = cur + pages;
		if (next < cur || next > limit) {
			free_uid(user);
			return -ENOMEM;
		}
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur, next));
	*userp = user;
	return 0;
}

void knem_lock_uncharge(struct user_struct *user, unsigned long pages)
{
	if (!user)
		return;
	atomic_long_sub(pages, &user->locked_vm);
	free_uid(user);
}

/*
 * Show @pages pinned pages in @mm's pinned_vm (VmPin in /proc/PID/status)
 * until knem_mm_unaccount(), as io_uring does: what a process pinned is
 * seen there, but the limit is the user's (knem_lock_charge()).
 */
void knem_mm_account(struct mm_struct *mm, unsigned long pages)
{
	mmgrab(mm);
	atomic64_add(pages, &mm->pinned_vm);
}

void knem_mm_unaccount(struct mm_struct *mm, unsigned long pages)
{
	atomic64_sub(pages, &mm->pinned_vm);
	mmdrop(mm);
}

static struct knem_user *knem_user_find(kuid_t uid)
{
	unsigned long index = from_kuid(&init_user_ns, uid);
	struct knem_user *user, *old;

	user = xa_load(&knem_users, index);
	if (user)
		return user;
	user = kzalloc(sizeof(*user), KNEM_GFP);
	if (!user)
		return ERR_PTR(-ENOMEM);
	old = xa_cmpxchg(&knem_users, index, NULL, user, KNEM_GFP);
	if (xa_is_err(old)) {
		kfree(user);
		return ERR_PTR(xa_err(old));
	}
	if (old) {
		kfree(user);	/* another creator of the same uid won */
		return old;
	}
	return user;
}

/* Count one more live region of @uid; ERR_PTR(-ENOSPC) over the limit. */
struct knem_user *knem_user_charge(kuid_t uid)
{
	struct knem_user *user = knem_user_find(uid);
	long cur;

	if (IS_ERR(user))
		return user;
	cur = atomic_long_read(&user->regions);
	do {
		if (cur >= (long)READ_ONCE(knem_max_user_regions))
			return ERR_PTR(-ENOSPC);
	} while (!atomic_long_try_cmpxchg(&user->regions, &cur, cur + 1));
	return user;
}

void knem_user_uncharge(struct knem_user *user)
{
	atomic_long_dec(&user->regions);
}

void knem_users_exit(void)
{
	struct knem_user *user;
	unsigned long index;

	xa_for_each(&knem_users, index, user) {
		WARN_ON(atomic_long_read(&user->regions));
		kfree(user);
	}
	xa_destroy(&knem_users);
}
