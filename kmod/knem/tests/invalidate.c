// SPDX-License-Identifier: GPL-2.0
/*
 * invalidate - invalidation status (KNEM_FEATURE_INVALIDATE) in a guest
 * with knem loaded: a region created with KNEM_FLAG_INVALIDATE_STATUS sets
 * its status slot SUCCESS, and FAILED once its range is unmapped and
 * mapped again or zapped by MADV_DONTNEED, while writes, mprotect, fork
 * and changes next to the range leave it SUCCESS; the region keeps
 * showing the pages it pinned; bad uses are EINVAL; destroy, close and
 * the creator's exit stop the watch and leave no page pinned.
 *
 *   invalidate             (extra arguments such as -test.* are ignored)
 */
#include "ktest.h"

#define PAGE 4096UL
#define SLOTS 64

struct dev {
	int fd;
	volatile knem_status_t *status;
};

static struct dev dev_status(void)
{
	struct dev d = { .fd = dev_open() };
	void *s = mmap(NULL, SLOTS, PROT_READ | PROT_WRITE, MAP_SHARED, d.fd,
		       0);

	if (s == MAP_FAILED) {
		perror("mmap status");
		exit(2);
	}
	d.status = s;
	return d;
}

static void dev_done(struct dev *d)
{
	munmap((void *)d->status, SLOTS);
	close(d->fd);
}

static int watched(int fd, void *p, size_t n, unsigned int flags,
		   unsigned int slot, knem_cookie_t *cookie)
{
	struct knem_cmd_param_iovec iov = { (uintptr_t)p, n };
	struct knem_cmd_create_region cr = {
		.iovec_array = (uintptr_t)&iov, .iovec_nr = 1,
		.flags = flags | KNEM_FLAG_INVALIDATE_STATUS,
		.protection = PROT_READ, .invalidate_status = slot,
	};
	int rc = ioctl(fd, KNEM_CMD_CREATE_REGION, &cr);

	*cookie = cr.cookie;
	return rc;
}

/* The region's bytes, read back through an INLINE_COPY. */
static int region_shows(int fd, knem_cookie_t c, size_t n, unsigned int seed)
{
	unsigned char *got = buf_alloc(n);
	uint32_t st = 0;
	int ok;

	ok = !inline_copy(fd, got, n, 0, c, 0, 0, 0, &st) &&
	     st == KNEM_STATUS_SUCCESS && same_pattern(got, n, 0, seed);
	munmap(got, n);
	return ok;
}

static int child_status(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_feature(void)
{
	struct knem_cmd_info info;
	int fd = dev_open();

	CHECK_OK(ioctl(fd, KNEM_CMD_GET_INFO, &info));
	CHECK(info.abi == KNEM_ABI_VERSION, "abi %#x", info.abi);
	CHECK(info.features & KNEM_FEATURE_INVALIDATE, "features %#x",
	      info.features);
	close(fd);
}

/* Each bad use is EINVAL, pins nothing and leaves the slot alone. */
static void test_bad_uses(void)
{
	unsigned char *p = buf_alloc(2 * PAGE);
	struct knem_cmd_param_iovec iov = { (uintptr_t)p, PAGE };
	struct knem_cmd_init_send_param is = {
		.send_iovec_array = (uintptr_t)&iov, .send_iovec_nr = 1,
		.flags = KNEM_FLAG_INVALIDATE_STATUS,
	};
	struct dev d;
	knem_cookie_t c;
	uint32_t st;
	int bare = dev_open();

	CHECK_ERR(watched(bare, p, PAGE, 0, 0, &c), EINVAL);	/* no array */
	close(bare);
	d = dev_status();
	d.status[3] = 77;
	/* The array is page-rounded: PAGE slots. */
	CHECK_ERR(watched(d.fd, p, PAGE, 0, PAGE, &c), EINVAL);
	CHECK_ERR(watched(d.fd, p, PAGE, KNEM_FLAG_SINGLEUSE, 3, &c), EINVAL);
	CHECK_ERR(watched(d.fd, p, PAGE, 1U << 9, 3, &c), EINVAL);
	CHECK(d.status[3] == 77, "slot written by a refused create: %d",
	      d.status[3]);
	CHECK_ERR(ioctl(d.fd, KNEM_CMD_INIT_SEND, &is), EINVAL);
	/* Copies know no such flag. */
	CHECK_OK(region(d.fd, p + PAGE, PAGE, PROT_READ, 0, &c));
	CHECK_ERR(inline_copy(d.fd, p, PAGE, 0, c,
			      0, KNEM_FLAG_INVALIDATE_STATUS, 0, &st), EINVAL);
	CHECK_OK(destroy(d.fd, c));
	/* Unreadable pages: EFAULT, and the watch is gone (no slot write). */
	CHECK_OK(munmap(p + PAGE, PAGE));
	CHECK_ERR(watched(d.fd, p, 2 * PAGE, 0, 3, &c), EFAULT);
	CHECK_OK(munmap(p, PAGE));
	dev_done(&d);
}

/*
 * Writes, mprotect, changes next to the range and other regions leave
 * the slot SUCCESS; the region shows the writes.
 */
static void test_untouched(void)
{
	size_t n = 4 * PAGE;
	unsigned char *buf = buf_alloc(n + 2 * PAGE), *p = buf + PAGE;
	struct dev d = dev_status();
	knem_cookie_t c, other;

	d.status[5] = KNEM_STATUS_PENDING;
	pattern(p, n, 1);
	CHECK_OK(watched(d.fd, p, n, 0, 5, &c));
	CHECK(d.status[5] == KNEM_STATUS_SUCCESS, "slot %d after create",
	      d.status[5]);
	pattern(p, n, 2);
	CHECK_OK(mprotect(p, n, PROT_READ));
	CHECK_OK(mprotect(p, n, PROT_READ | PROT_WRITE));
	CHECK_OK(madvise(buf, PAGE, MADV_DONTNEED));
	CHECK_OK(munmap(p + n, PAGE));
	CHECK_OK(region(d.fd, buf, PAGE, PROT_READ, 0, &other));
	CHECK_OK(destroy(d.fd, other));
	CHECK(d.status[5] == KNEM_STATUS_SUCCESS, "slot %d, range untouched",
	      d.status[5]);
	CHECK(region_shows(d.fd, c, n, 2), "region lost the writes");
	CHECK_OK(destroy(d.fd, c));
	dev_done(&d);
	munmap(buf, n + PAGE);
}

/*
 * Pages never written map the shared zero page.  6.12 replaces it while
 * pinning (a change of the range inside creation: pinned again, the slot
 * starts SUCCESS); 6.1 pins the zero page itself, so the first write
 * replaces it and the slot turns FAILED.  Either way the contract holds:
 * while the slot reads SUCCESS the region is the buffer.
 */
static void test_untouched_pages(void)
{
	size_t n = 3 * PAGE;
	unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct dev d = dev_status();
	volatile unsigned char sink;
	knem_cookie_t c;

	CHECK(p != MAP_FAILED, "mmap");
	sink = p[PAGE];		/* maps the zero page there */
	(void)sink;
	CHECK_OK(watched(d.fd, p, n, 0, 6, &c));
	CHECK(d.status[6] == KNEM_STATUS_SUCCESS, "slot %d after create",
	      d.status[6]);
	pattern(p, n, 8);
	CHECK(d.status[6] == KNEM_STATUS_SUCCESS ||
	      d.status[6] == KNEM_STATUS_FAILED, "slot %d after writes",
	      d.status[6]);
	if (d.status[6] == KNEM_STATUS_SUCCESS)
		CHECK(region_shows(d.fd, c, n, 8),
		      "slot SUCCESS but the region is not the buffer");
	CHECK_OK(destroy(d.fd, c));
	dev_done(&d);
	munmap(p, n);
}

/*
 * munmap and mmap again at the same address: FAILED, and the region still
 * shows the old pages, not what the new mapping holds.
 */
static void test_remap(void)
{
	size_t n = 3 * PAGE;
	unsigned char *p = buf_alloc(n), *q;
	struct dev d = dev_status();
	knem_cookie_t c;

	pattern(p, n, 3);
	CHECK_OK(watched(d.fd, p, n, 0, 7, &c));
	CHECK(d.status[7] == KNEM_STATUS_SUCCESS, "slot %d", d.status[7]);
	CHECK_OK(munmap(p, n));
	CHECK(d.status[7] == KNEM_STATUS_FAILED, "slot %d after munmap",
	      d.status[7]);
	q = mmap(p, n, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	CHECK(q == p, "mmap again at %p: %p", (void *)p, (void *)q);
	pattern(q, n, 4);
	CHECK(region_shows(d.fd, c, n, 3), "region does not show its pages");
	/* A new region of the same addresses watches the new pages. */
	CHECK_OK(destroy(d.fd, c));
	CHECK_OK(watched(d.fd, q, n, 0, 7, &c));
	CHECK(d.status[7] == KNEM_STATUS_SUCCESS, "slot %d, new region",
	      d.status[7]);
	CHECK(region_shows(d.fd, c, n, 4), "new region, wrong pages");
	CHECK_OK(destroy(d.fd, c));
	dev_done(&d);
	munmap(q, n);
}

/* MADV_DONTNEED of one page in the middle (Go's scavenger): FAILED. */
static void test_dontneed(void)
{
	size_t n = 4 * PAGE;
	unsigned char *p = buf_alloc(n);
	struct dev d = dev_status();
	knem_cookie_t c, c2;

	pattern(p, n, 5);
	CHECK_OK(watched(d.fd, p, n, 0, 9, &c));
	CHECK_OK(watched(d.fd, p + n - PAGE, PAGE, 0, 10, &c2));
	CHECK_OK(madvise(p + PAGE, PAGE, MADV_DONTNEED));
	CHECK(d.status[9] == KNEM_STATUS_FAILED, "slot %d after DONTNEED",
	      d.status[9]);
	CHECK(d.status[10] == KNEM_STATUS_SUCCESS,
	      "slot %d of a region beside the zapped page", d.status[10]);
	CHECK(p[PAGE] == 0 && p[PAGE + 1] == 0, "zapped page not zero");
	CHECK(region_shows(d.fd, c, n, 5), "region does not show its pages");
	CHECK_OK(destroy(d.fd, c));
	CHECK_OK(destroy(d.fd, c2));
	dev_done(&d);
	munmap(p, n);
}

/* fork keeps the parent's pinned pages in place: still SUCCESS. */
static void test_fork(void)
{
	size_t n = 2 * PAGE;
	unsigned char *p = buf_alloc(n);
	struct dev d = dev_status();
	knem_cookie_t c;
	pid_t pid;
	int rc;

	pattern(p, n, 6);
	CHECK_OK(watched(d.fd, p, n, 0, 11, &c));
	pid = fork();
	if (pid == 0)
		_exit(same_pattern(p, n, 0, 6) ? 0 : 10);
	rc = child_status(pid);
	CHECK(rc == 0, "child exit %d", rc);
	pattern(p, n, 7);
	CHECK(d.status[11] == KNEM_STATUS_SUCCESS, "slot %d after fork",
	      d.status[11]);
	CHECK(region_shows(d.fd, c, n, 7), "parent's writes not in region");
	CHECK_OK(destroy(d.fd, c));
	dev_done(&d);
	munmap(p, n);
}

/*
 * The watch ends with the region: after destroy, and after close, an
 * munmap writes no slot; a creator exiting with watched regions leaves no
 * page pinned (run() checks the count after every case).
 */
static void test_teardown(void)
{
	size_t n = 2 * PAGE;
	unsigned char *p = buf_alloc(n);
	struct dev d = dev_status();
	knem_cookie_t c;
	pid_t pid;
	int rc;

	CHECK_OK(watched(d.fd, p, PAGE, 0, 12, &c));
	CHECK_OK(destroy(d.fd, c));
	d.status[12] = KNEM_STATUS_PENDING;
	CHECK_OK(madvise(p, PAGE, MADV_DONTNEED));
	CHECK(d.status[12] == KNEM_STATUS_PENDING,
	      "destroyed region wrote its slot: %d", d.status[12]);

	pid = fork();
	if (pid == 0) {
		struct dev cd = dev_status();
		unsigned char *q = buf_alloc(64 * PAGE);
		int i;

		alarm(60);
		for (i = 0; i < 32; i++)
			if (watched(cd.fd, q + 2 * i * PAGE, 2 * PAGE, 0, i, &c))
				_exit(10);
		/* Exit tears the mm down with the watches in place. */
		_exit(0);
	}
	rc = child_status(pid);
	CHECK(rc == 0, "child exit %d (10: create)", rc);

	CHECK_OK(watched(d.fd, p + PAGE, PAGE, 0, 13, &c));
	dev_done(&d);
	/* Closed: the array is gone with the file, and munmap is harmless. */
	CHECK_OK(munmap(p, n));
}

static const struct tcase cases[] = {
	{ "TestInvalidateFeature", test_feature },
	{ "TestInvalidateBadUses", test_bad_uses },
	{ "TestInvalidateUntouched", test_untouched },
	{ "TestInvalidateUntouchedPages", test_untouched_pages },
	{ "TestInvalidateRemap", test_remap },
	{ "TestInvalidateDontneed", test_dontneed },
	{ "TestInvalidateFork", test_fork },
	{ "TestInvalidateTeardown", test_teardown },
};

int main(void)
{
	return ktest_main(cases, sizeof(cases) / sizeof(cases[0]));
}
