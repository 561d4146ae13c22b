// SPDX-License-Identifier: GPL-2.0
/*
 * Resource accounting: what bounds a user of the 0666 device.
 *
 * KNEM puts no per-descriptor cap on regions (registration caches keep tens
 * of thousands alive for a whole job), so knem bounds memory the way the
 * rest of the kernel does:
 *
 *  - pinned pages are charged to the pinning process's mm->pinned_vm and
 *    checked against RLIMIT_MEMLOCK, unless the caller has CAP_IPC_LOCK,
 *    as RDMA and VFIO do; over the limit is ENOMEM;
 *  - the driver's own allocations use GFP_KERNEL_ACCOUNT (memory cgroup);
 *  - live regions are counted per creating euid against the max_user_regions
 *    module parameter; over it is ENOSPC.
 *
 * The per-user counters live in an xarray indexed by the uid; an entry is
 * made on a uid's first region and kept until the module unloads (only a
 * privileged process can take new uids, so the table stays small).
 */
#include <linux/capability.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/xarray.h>

#include "knem_priv.h"

struct knem_user {
	atomic_long_t regions;
};

static DEFINE_XARRAY(knem_users);

/*
 * Charge @pages pinned pages to @mm.  On success the caller owns a
 * reference to @mm (mmgrab) that knem_mm_uncharge() drops.
 */
int knem_mm_charge(struct mm_struct *mm, unsigned long pages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	s64 locked;

	if (!mm)
		return -EFAULT;
	locked = atomic64_add_return(pages, &mm->pinned_vm);
	if (locked > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(pages, &mm->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(mm);
	return 0;
}

void knem_mm_uncharge(struct mm_struct *mm, unsigned long pages)
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
	user = kzalloc(sizeof(*user), GFP_KERNEL_ACCOUNT);
	if (!user)
		return ERR_PTR(-ENOMEM);
	old = xa_cmpxchg(&knem_users, index, NULL, user, GFP_KERNEL_ACCOUNT);
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

	if (IS_ERR(user))
		return user;
	if (atomic_long_inc_return(&user->regions) >
	    READ_ONCE(knem_max_user_regions)) {
		atomic_long_dec(&user->regions);
		return ERR_PTR(-ENOSPC);
	}
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
