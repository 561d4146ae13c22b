// SPDX-License-Identifier: GPL-2.0
/*
 * attach - region attach (KNEM_FEATURE_ATTACH) in a guest with knem
 * loaded: data read and written through the mapping (checked against a
 * pattern), the access rules of copies (EACCES, EPERM, EINVAL), and the
 * lifetimes: creator exit, region destroy, fork and partial munmap while
 * mapped, with no page left pinned after each case.
 *
 *   attach                 (extra arguments such as -test.* are ignored)
 */
#include "ktest.h"

#define PAGE 4096UL

struct attached {
	unsigned char *map;	/* the whole mapping */
	unsigned char *data;	/* the region's first byte in it */
	struct knem_cmd_attach_region ar;
};

static int attach(int fd, knem_cookie_t c, unsigned int prot,
		  struct attached *a)
{
	memset(a, 0, sizeof(*a));
	a->ar.cookie = c;
	a->ar.protection = prot;
	return ioctl(fd, KNEM_CMD_ATTACH_REGION, &a->ar);
}

static int attach_map(int fd, knem_cookie_t c, unsigned int prot,
		      struct attached *a)
{
	if (attach(fd, c, prot, a))
		return -1;
	a->map = mmap(NULL, a->ar.map_length, prot, MAP_SHARED, fd,
		      a->ar.offset);
	if (a->map == MAP_FAILED)
		return -1;
	a->data = a->map + a->ar.data_offset;
	return 0;
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
	CHECK(info.features & KNEM_FEATURE_ATTACH, "features %#x",
	      info.features);
	close(fd);
}

/*
 * Another process (same uid) attaches a region of 5 pages + 100 bytes that
 * starts 300 bytes into a page, reads it through the mapping, writes it;
 * the creator sees the writes.
 */
static void test_read_write(void)
{
	size_t n = 5 * PAGE + 100;
	unsigned char *buf = buf_alloc(n + PAGE);
	unsigned char *p = buf + 300;
	knem_cookie_t c;
	int fd = dev_open(), rc;
	pid_t pid;

	pattern(p, n, 1);
	CHECK_OK(region(fd, p, n, PROT_READ | PROT_WRITE, 0, &c));
	pid = fork();
	if (pid == 0) {
		struct attached a;
		int cfd = dev_open();

		alarm(60);
		if (attach_map(cfd, c, PROT_READ | PROT_WRITE, &a))
			_exit(10);
		if (a.ar.data_offset != 300 || a.ar.data_length != n ||
		    a.ar.map_length != 6 * PAGE)
			_exit(11);
		if (!same_pattern(a.data, n, 0, 1))
			_exit(12);
		pattern(a.data, n, 2);
		munmap(a.map, a.ar.map_length);
		close(cfd);
		_exit(0);
	}
	rc = child_status(pid);
	CHECK(rc == 0, "child exit %d (10 attach/mmap, 11 lengths, 12 data)",
	      rc);
	CHECK(same_pattern(p, n, 0, 2), "writes through the mapping lost");
	CHECK(buf[299] == 0 && buf[300 + n] == 0, "write outside the region");
	close(fd);
	munmap(buf, n + PAGE);
}

/* The rules of copies, and a mapping never gets more than attached. */
static void test_protection(void)
{
	size_t n = 2 * PAGE;
	unsigned char *p = buf_alloc(n), *q = buf_alloc(3 * PAGE);
	struct knem_cmd_param_iovec iov[2] = {
		{ (uintptr_t)q, 100 }, { (uintptr_t)q + 2 * PAGE, 100 },
	};
	struct knem_cmd_create_region cr = {
		.iovec_array = (uintptr_t)iov, .iovec_nr = 2,
		.protection = PROT_READ,
	};
	struct attached a;
	knem_cookie_t ro, single;
	int fd = dev_open();

	CHECK_OK(region(fd, p, n, PROT_READ, 0, &ro));
	CHECK_ERR(attach(fd, ro, PROT_READ | PROT_WRITE, &a), EACCES);
	CHECK_ERR(attach(fd, ro, 0, &a), EINVAL);
	CHECK_ERR(attach(fd, ro, PROT_READ | PROT_EXEC, &a), EINVAL);
	CHECK_ERR(attach(fd, ro ^ 1, PROT_READ, &a), EINVAL);
	CHECK_OK(attach(fd, ro, PROT_READ, &a));
	CHECK(mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   a.ar.offset) == MAP_FAILED && errno == EACCES,
	      "writable mapping of a read attachment: %s", strerror(errno));
	CHECK(mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, a.ar.offset) ==
	      MAP_FAILED && errno == EINVAL, "private mapping");
	CHECK(mmap(NULL, n + PAGE, PROT_READ, MAP_SHARED, fd, a.ar.offset) ==
	      MAP_FAILED && errno == EINVAL, "mapping past the region");
	a.map = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, a.ar.offset);
	CHECK(a.map != MAP_FAILED, "mmap: %s", strerror(errno));
	CHECK_ERR(mprotect(a.map, n, PROT_READ | PROT_WRITE), EACCES);
	CHECK_ERR(mprotect(a.map, n, PROT_READ | PROT_EXEC), EACCES);
	munmap(a.map, n);
	CHECK_OK(ioctl(fd, KNEM_CMD_DETACH_REGION, &a.ar.offset));
	CHECK_ERR(ioctl(fd, KNEM_CMD_DETACH_REGION, &a.ar.offset), EINVAL);
	CHECK(mmap(NULL, n, PROT_READ, MAP_SHARED, fd, a.ar.offset) ==
	      MAP_FAILED && errno == EINVAL, "mmap after detach");
	/* SINGLEUSE is for one copy; iovecs with holes map no flat run. */
	CHECK_OK(region(fd, p, n, PROT_READ, KNEM_FLAG_SINGLEUSE, &single));
	CHECK_ERR(attach(fd, single, PROT_READ, &a), EINVAL);
	CHECK_OK(ioctl(fd, KNEM_CMD_CREATE_REGION, &cr));
	CHECK_ERR(attach(fd, cr.cookie, PROT_READ, &a), EINVAL);
	close(fd);
	munmap(p, n);
	munmap(q, 3 * PAGE);
}

/* Another uid: EPERM, unless ANY_USER_ACCESS. */
static void test_other_uid(void)
{
	size_t n = PAGE;
	unsigned char *p = buf_alloc(n);
	knem_cookie_t c, cany;
	int fd = dev_open(), rc;
	pid_t pid;

	pattern(p, n, 3);
	CHECK_OK(region(fd, p, n, PROT_READ, 0, &c));
	CHECK_OK(region(fd, p, n, PROT_READ, KNEM_FLAG_ANY_USER_ACCESS, &cany));
	pid = fork();
	if (pid == 0) {
		struct attached a;
		int cfd;

		alarm(60);
		if (setuid(65534))
			_exit(10);
		cfd = dev_open();
		if (attach(cfd, c, PROT_READ, &a) != -1 || errno != EPERM)
			_exit(11);
		/* The same descriptor as root's, after setuid: EPERM too. */
		if (attach(fd, c, PROT_READ, &a) != -1 || errno != EPERM)
			_exit(12);
		if (attach_map(cfd, cany, PROT_READ, &a) ||
		    !same_pattern(a.data, n, 0, 3))
			_exit(13);
		_exit(0);
	}
	rc = child_status(pid);
	CHECK(rc == 0, "child exit %d (11/12 attached another uid's region, "
	      "13 ANY_USER_ACCESS)", rc);
	close(fd);
	munmap(p, n);
}

/*
 * The creator exits (closing its descriptor destroys the region) or
 * destroys the region while another process has it mapped: the mapping
 * keeps reading the pages, a new mmap of the attachment is EINVAL, and the
 * pages are unpinned once it is unmapped.
 */
static void creator_gone(int destroy_only)
{
	size_t n = 16 * PAGE;
	volatile knem_cookie_t *shared = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
					     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	long pinned = stat_value("pinned pages");
	int pipefd[2], fd = dev_open(), rc;
	struct attached a;
	size_t i;
	char go = 0;
	pid_t pid;

	CHECK(pipe(pipefd) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		unsigned char *p = buf_alloc(n);
		knem_cookie_t c;
		int cfd = dev_open();

		alarm(60);
		pattern(p, n, 4);
		if (region(cfd, p, n, PROT_READ, 0, &c))
			_exit(10);
		shared[0] = c;
		if (read(pipefd[0], &go, 1) != 1)
			_exit(11);
		if (destroy_only && destroy(cfd, c))
			_exit(12);
		/* Scribble over the memory before it goes. */
		memset(p, 0, n);
		_exit(0);
	}
	while (!shared[0])
		usleep(1000);
	CHECK_OK(attach_map(fd, shared[0], PROT_READ, &a));
	CHECK(write(pipefd[1], &go, 1) == 1, "pipe write");
	rc = child_status(pid);
	CHECK(rc == 0, "creator exit %d", rc);
	CHECK(stat_value("pinned pages") == pinned + 16, "pages not held");
	/* The creator's pages themselves: its last writes show. */
	for (i = 0; i < n; i++)
		CHECK(!a.data[i], "byte %zu is %u, not the creator's last 0", i,
		      a.data[i]);
	CHECK(mmap(NULL, n, PROT_READ, MAP_SHARED, fd, a.ar.offset) ==
	      MAP_FAILED && errno == EINVAL, "mmap of a destroyed region");
	CHECK_OK(ioctl(fd, KNEM_CMD_DETACH_REGION, &a.ar.offset));
	/* Still mapped: still pinned; unmapped: released. */
	CHECK(stat_value("pinned pages") == pinned + 16, "pages released early");
	munmap(a.map, n);
	CHECK(stat_value("pinned pages") == pinned, "pages still pinned");
	close(fd);
	close(pipefd[0]);
	close(pipefd[1]);
	munmap((void *)shared, PAGE);
}

static void test_creator_exit(void) { creator_gone(0); }
static void test_region_destroy(void) { creator_gone(1); }

/*
 * A forked child inherits the mapping and reads it after the parent
 * unmapped and detached; a partial munmap leaves the rest readable.
 */
static void test_fork_and_munmap(void)
{
	size_t n = 8 * PAGE;
	unsigned char *p = buf_alloc(n);
	long pinned = stat_value("pinned pages");
	struct attached a;
	knem_cookie_t c;
	int fd = dev_open(), pipefd[2], rc;
	char go = 0;
	pid_t pid;

	pattern(p, n, 5);
	CHECK_OK(region(fd, p, n, PROT_READ, 0, &c));
	CHECK_OK(attach_map(fd, c, PROT_READ, &a));
	CHECK(pipe(pipefd) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		alarm(60);
		if (read(pipefd[0], &go, 1) != 1)
			_exit(10);
		_exit(same_pattern(a.data, n, 0, 5) ? 0 : 11);
	}
	CHECK_OK(ioctl(fd, KNEM_CMD_DETACH_REGION, &a.ar.offset));
	/* Unmap the middle: the two ends stay. */
	CHECK_OK(munmap(a.map + 3 * PAGE, 2 * PAGE));
	CHECK(same_pattern(a.data, 3 * PAGE, 0, 5) &&
	      same_pattern(a.data + 5 * PAGE, 3 * PAGE, 5 * PAGE, 5),
	      "split mapping");
	CHECK_OK(munmap(a.map, 3 * PAGE));
	CHECK_OK(destroy(fd, c));
	CHECK_OK(munmap(a.map + 5 * PAGE, 3 * PAGE));
	/* The child's copy of the mapping still holds the pages. */
	CHECK(stat_value("pinned pages") == pinned + 8, "child's pages gone");
	CHECK(write(pipefd[1], &go, 1) == 1, "pipe write");
	rc = child_status(pid);
	CHECK(rc == 0, "child exit %d (11: inherited mapping wrong)", rc);
	CHECK(stat_value("pinned pages") == pinned, "pages still pinned");
	close(fd);
	close(pipefd[0]);
	close(pipefd[1]);
	munmap(p, n);
}

static const struct tcase cases[] = {
	{ "TestAttachFeature", test_feature },
	{ "TestAttachReadWrite", test_read_write },
	{ "TestAttachProtection", test_protection },
	{ "TestAttachOtherUid", test_other_uid },
	{ "TestAttachCreatorExit", test_creator_exit },
	{ "TestAttachRegionDestroy", test_region_destroy },
	{ "TestAttachForkAndMunmap", test_fork_and_munmap },
};

int main(void)
{
	return ktest_main(cases, sizeof(cases) / sizeof(cases[0]));
}
