// SPDX-License-Identifier: GPL-2.0
/*
 * trust - the limits /dev/knem (mode 0666) holds against a hostile local
 * user, each checked with exact errno values in a guest with knem and
 * softdma loaded (run as root; cases drop to uid 65534 in children):
 *
 *   - another uid cannot query (ATTACH_REGION), map (mmap of an
 *     attachment) or copy from a region: EPERM, through a descriptor of
 *     its own or one root opened and attached with;
 *   - pinned pages stay charged to the user who pinned them while anyone
 *     holds them: after the creator exits, its user still cannot pin past
 *     RLIMIT_MEMLOCK while an attachment keeps its pages;
 *   - kill -9 stops a 256 MiB CPU copy, and a queued asynchronous one, short
 *     of the whole, and nr_foll_pin_acquired - nr_foll_pin_released comes
 *     back to its value before;
 *   - a small memory cgroup stops a flood of status arrays and regions with
 *     ENOMEM, and its memory.events shows no OOM kill;
 *   - a flood of empty regions stops at max_user_regions (ENOSPC);
 *   - NOTIFY_FD yields a file's indexes in submission order;
 *   - a DMA engine that cannot be stopped fails its copy at the timeout and
 *     keeps its pages pinned until its descriptors finish;
 *   - the module unloads afterwards.
 *
 * Each would have failed on the driver before: an attachment mapped by
 * any uid, RLIMIT_MEMLOCK escaped through an attachment, copies that
 * could not be killed, a close that waited for every queued copy, status
 * arrays charged to nobody, a million empty regions, two adjacent
 * indexes of 1,024 swapped, an endless wait for a stuck engine.
 */
#include "ktest.h"

#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/statfs.h>

#define PAGE 4096UL
#define MIB (1UL << 20)
#define NOBODY 65534

static int child_status(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A page shared with the children, for cookies and flags. */
static volatile uint64_t *shared_page(void)
{
	void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	memset(p, 0, PAGE);
	return p;
}

static int attach(int fd, knem_cookie_t c, struct knem_cmd_attach_region *ar)
{
	memset(ar, 0, sizeof(*ar));
	ar->cookie = c;
	ar->protection = PROT_READ;
	return ioctl(fd, KNEM_CMD_ATTACH_REGION, ar);
}

/* mmap of an attachment: 0, or -1 with errno. */
static int map_attached(int fd, const struct knem_cmd_attach_region *ar,
			unsigned char **map)
{
	*map = mmap(NULL, ar->map_length, PROT_READ, MAP_SHARED, fd,
		    ar->offset);
	return *map == MAP_FAILED ? -1 : 0;
}

static int copy_regions(int fd, knem_cookie_t src, knem_cookie_t dst,
			uint32_t flags, uint32_t idx, uint32_t *status)
{
	struct knem_cmd_copy c = {
		.src_cookie = src, .dst_cookie = dst, .flags = flags,
		.async_status_index = idx, .current_status = 0xdead,
	};
	int rc = ioctl(fd, KNEM_CMD_COPY, &c);

	*status = c.current_status;
	return rc;
}

/* The pins the whole kernel holds now: /proc/vmstat, folded exactly. */
static long pins_held(void)
{
	char line[128];
	long acq = -1, rel = -1;
	FILE *f;
	int fd = open("/proc/sys/vm/stat_refresh", O_WRONLY);

	if (fd >= 0) {
		if (write(fd, "1", 1) != 1)
			perror("stat_refresh");
		close(fd);
	}
	f = fopen("/proc/vmstat", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "nr_foll_pin_acquired %ld", &acq);
		sscanf(line, "nr_foll_pin_released %ld", &rel);
	}
	fclose(f);
	return acq < 0 || rel < 0 ? -1 : acq - rel;
}

/* pins_held() once it is back to @before (pages unpinned by a worker). */
static long pins_settled(long before)
{
	long now = pins_held();
	int i;

	for (i = 0; i < 500 && now != before; i++) {
		usleep(10000);
		now = pins_held();
	}
	return now;
}

static long param_value(const char *mod, const char *param)
{
	char path[256], text[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/module/%s/parameters/%s", mod,
		 param);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = 0;
	return atol(text);
}

/* ------------------------------------------------- 1. other users: EPERM */

/*
 * What uid 65534 tries with root's region, through @fd: query, map the
 * attachment root made (@ar), copy; and the ANY_USER_ACCESS region @any
 * works.  Returns 0 or the number of the step that went wrong.
 */
static int nobody_tries(int fd, knem_cookie_t c, knem_cookie_t any,
			const struct knem_cmd_attach_region *ar,
			const unsigned char *expect, size_t n)
{
	struct knem_cmd_attach_region mine;
	unsigned char *map, *q = buf_alloc(n);
	knem_cookie_t dst;
	uint32_t st;

	if (attach(fd, c, &mine) != -1 || errno != EPERM)
		return 1;
	if (ar && (map_attached(fd, ar, &map) != -1 || errno != EPERM))
		return 2;
	if (inline_copy(fd, q, n, 0, c, 0, 0, 0, &st) != -1 || errno != EPERM)
		return 3;
	if (region(fd, q, n, PROT_WRITE, 0, &dst))
		return 4;
	if (copy_regions(fd, c, dst, 0, 0, &st) != -1 || errno != EPERM)
		return 5;
	if (attach(fd, any, &mine) || map_attached(fd, &mine, &map) ||
	    memcmp(map + mine.data_offset, expect, n))
		return 6;
	if (copy_regions(fd, any, dst, 0, 0, &st) ||
	    st != KNEM_STATUS_SUCCESS || memcmp(q, expect, n))
		return 7;
	return 0;
}

static void test_other_uid(void)
{
	size_t n = 4 * PAGE;
	unsigned char *p = buf_alloc(n);
	struct knem_cmd_attach_region ar;
	knem_cookie_t c, any;
	int fd = dev_open(), rc, own;
	pid_t pid;

	pattern(p, n, 1);
	CHECK_OK(region(fd, p, n, PROT_READ | PROT_WRITE, 0, &c));
	CHECK_OK(region(fd, p, n, PROT_READ, KNEM_FLAG_ANY_USER_ACCESS, &any));
	CHECK_OK(attach(fd, c, &ar));
	for (own = 0; own < 2; own++) {
		pid = fork();
		if (pid == 0) {
			alarm(120);
			if (setuid(NOBODY))
				_exit(20);
			/* Root's descriptor (and attachment), or its own. */
			_exit(nobody_tries(own ? dev_open() : fd, c, any,
					   own ? NULL : &ar, p, n));
		}
		rc = child_status(pid);
		CHECK(rc == 0, "uid %d through %s descriptor: step %d failed "
		      "(1 query, 2 mmap of root's attachment, 3 inline copy, "
		      "5 copy: not EPERM; 6, 7 ANY_USER_ACCESS refused)",
		      NOBODY, own ? "its own" : "root's", rc);
	}
	close(fd);
	munmap(p, n);
}

/* ------------------------------------ 2. RLIMIT_MEMLOCK is the user's */

/*
 * Creator A (uid 65534, 16-page limit) pins 16 pages; B (same uid)
 * attaches and maps them; A exits.  While B's mapping holds the pages,
 * C (same uid, same limit) cannot pin one page (ENOMEM); once B unmaps,
 * C pins 16.
 */
static void test_memlock_after_exit(void)
{
	const size_t n = 16 * PAGE;
	struct rlimit lim = { n, n };
	volatile uint64_t *sh = shared_page();
	unsigned char *p = buf_alloc(n);
	int rc;
	pid_t a, b, c;

	pattern(p, n, 2);
	a = fork();
	if (a == 0) {
		knem_cookie_t ck;
		int fd;

		alarm(120);
		if (setrlimit(RLIMIT_MEMLOCK, &lim) || setuid(NOBODY))
			_exit(10);
		fd = dev_open();
		if (region(fd, p, n, PROT_READ, 0, &ck))
			_exit(11);
		sh[0] = ck;
		while (!sh[1])		/* B has mapped it */
			usleep(1000);
		_exit(0);		/* closes fd: the region is unpublished */
	}
	b = fork();
	if (b == 0) {
		struct knem_cmd_attach_region ar;
		unsigned char *map;
		int fd;

		alarm(120);
		if (setrlimit(RLIMIT_MEMLOCK, &lim) || setuid(NOBODY))
			_exit(10);
		fd = dev_open();
		while (!sh[0])
			usleep(1000);
		if (attach(fd, sh[0], &ar) || map_attached(fd, &ar, &map))
			_exit(12);
		close(fd);		/* the mapping alone holds the pages */
		sh[1] = 1;
		while (!sh[2])		/* C tried */
			usleep(1000);
		if (memcmp(map + ar.data_offset, p, n))
			_exit(13);
		munmap(map, ar.map_length);
		sh[3] = 1;
		_exit(0);
	}
	rc = child_status(a);
	CHECK(rc == 0, "creator exit %d (11: its region refused)", rc);
	c = fork();
	if (c == 0) {
		unsigned char *q = buf_alloc(n);
		knem_cookie_t ck;
		int fd;

		alarm(120);
		if (setrlimit(RLIMIT_MEMLOCK, &lim) || setuid(NOBODY))
			_exit(10);
		fd = dev_open();
		if (region(fd, q, PAGE, PROT_READ, 0, &ck) != -1 ||
		    errno != ENOMEM) {
			sh[2] = 1;
			_exit(14);
		}
		sh[2] = 1;
		while (!sh[3])		/* B unmapped */
			usleep(1000);
		if (region(fd, q, n, PROT_READ, 0, &ck))
			_exit(15);
		_exit(0);
	}
	rc = child_status(c);
	CHECK(rc == 0, "third process exit %d (14: pinned past the user's "
	      "RLIMIT_MEMLOCK while an attachment held the exited creator's "
	      "pages, 15: charge not returned at unmap)", rc);
	rc = child_status(b);
	CHECK(rc == 0, "attaching process exit %d (12: attach or mmap, 13: data)",
	      rc);
	munmap((void *)sh, PAGE);
	munmap(p, n);
}

/* ------------------------------------------------------- 3. kill -9 */

#define BIG (256 * MIB)
#define CHUNK (32 * MIB)

/*
 * 256 MiB to copy from: a 32 MiB memfd mapped 8 times end to end (the
 * guest has 1 GiB), and 256 MiB of anonymous memory to copy to.
 */
struct big {
	unsigned char *src, *dst;
	int mfd;
};

static int big_alloc(struct big *b)
{
	unsigned char *chunk;
	size_t i;

	b->mfd = memfd_create("knem-trust", 0);
	if (b->mfd < 0 || ftruncate(b->mfd, CHUNK))
		return -1;
	chunk = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED, b->mfd, 0);
	if (chunk == MAP_FAILED)
		return -1;
	memset(chunk, 0x5a, CHUNK);
	munmap(chunk, CHUNK);
	b->src = mmap(NULL, BIG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b->src == MAP_FAILED)
		return -1;
	for (i = 0; i < BIG / CHUNK; i++)
		if (mmap(b->src + i * CHUNK, CHUNK, PROT_READ,
			 MAP_SHARED | MAP_FIXED, b->mfd, 0) == MAP_FAILED)
			return -1;
	b->dst = buf_alloc(BIG);
	return 0;
}

static void big_free(struct big *b)
{
	munmap(b->src, BIG);
	munmap(b->dst, BIG);
	close(b->mfd);
}

/* Bytes of @dst the copy wrote: its first page still zero. */
static size_t copied_prefix(const unsigned char *dst)
{
	size_t off;

	for (off = 0; off < BIG; off += PAGE)
		if (dst[off] != 0x5a)
			return off;
	return BIG;
}

/*
 * Wait until the copy into @dst began (and @ready, when given, is set),
 * then kill @pid; its exit status.
 */
static int kill_when_started(pid_t pid, volatile unsigned char *dst,
			     volatile uint64_t *ready)
{
	int i;

	for (i = 0; i < 600000 && (dst[0] != 0x5a || (ready && !*ready)); i++)
		usleep(100);
	kill(pid, SIGKILL);
	return child_status(pid);
}

/* A synchronous CPU copy of 256 MiB, killed once it began. */
static void test_kill_cpu_copy(void)
{
	long before = pins_held();
	knem_cookie_t src, dst;
	struct big b;
	size_t done;
	uint32_t st;
	int fd = dev_open(), rc;
	pid_t pid;

	CHECK(before >= 0, "no nr_foll_pin counters in /proc/vmstat");
	CHECK_OK(big_alloc(&b));
	CHECK_OK(region(fd, b.src, BIG, PROT_READ, 0, &src));
	CHECK_OK(region(fd, b.dst, BIG, PROT_WRITE, 0, &dst));
	pid = fork();
	if (pid == 0) {
		copy_regions(fd, src, dst, 0, 0, &st);
		_exit(1);
	}
	rc = kill_when_started(pid, b.dst, NULL);
	done = copied_prefix(b.dst);
	printf("    killed after %zu of %lu bytes\n", done, BIG);
	CHECK(rc == 128 + SIGKILL, "copying child exit %d (1: the copy "
	      "returned before the kill)", rc);
	CHECK(done > 0 && done < BIG, "copied %zu of %lu bytes: the copy "
	      "did not stop at the kill", done, BIG);
	CHECK_OK(destroy(fd, src));
	CHECK_OK(destroy(fd, dst));
	close(fd);
	big_free(&b);
	rc = pins_settled(before);
	CHECK(rc == before, "pins held %ld before, %d after", before, rc);
}

/*
 * Asynchronous copies of a killed process: one of 256 MiB in flight and a
 * one-page one queued behind it on the same descriptor.  Its exit closes
 * the descriptor: the copy in flight stops short, the queued one never
 * runs, and the exit does not wait for 256 MiB to be copied.
 */
static void test_kill_queued_copy(void)
{
	long before = pins_held();
	volatile uint64_t *sh = shared_page();
	unsigned char *small = buf_alloc(PAGE);
	knem_cookie_t src, dst, dst2;
	struct big b;
	size_t done, i;
	int fd = dev_open(), rc;
	pid_t pid;

	CHECK(before >= 0, "no nr_foll_pin counters in /proc/vmstat");
	CHECK_OK(big_alloc(&b));
	CHECK_OK(region(fd, b.src, BIG, PROT_READ, 0, &src));
	CHECK_OK(region(fd, b.dst, BIG, PROT_WRITE, 0, &dst));
	CHECK_OK(region(fd, small, PAGE, PROT_WRITE, 0, &dst2));
	pid = fork();
	if (pid == 0) {
		int cfd = dev_open();
		uint32_t st1, st2;

		if (mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, cfd,
			 0) == MAP_FAILED)
			_exit(2);
		if (copy_regions(cfd, src, dst, KNEM_FLAG_MEMCPYTHREAD, 0,
				 &st1) ||
		    copy_regions(cfd, src, dst2, KNEM_FLAG_MEMCPYTHREAD, 1,
				 &st2))
			_exit(3);
		sh[0] = st1 == KNEM_STATUS_PENDING &&
			st2 == KNEM_STATUS_PENDING ? 1 : 2;
		pause();
		_exit(4);
	}
	rc = kill_when_started(pid, b.dst, sh);
	done = copied_prefix(b.dst);
	printf("    killed after %zu of %lu bytes\n", done, BIG);
	CHECK(rc == 128 + SIGKILL, "submitting child exit %d (2 mmap, 3 "
	      "submit failed)", rc);
	CHECK(sh[0] == 1, "copies not PENDING");
	CHECK(done > 0 && done < BIG, "copied %zu of %lu bytes: the close "
	      "waited for the copy in flight", done, BIG);
	for (i = 0; i < PAGE; i++)
		CHECK(!small[i], "the queued copy ran after the close");
	CHECK_OK(destroy(fd, src));
	CHECK_OK(destroy(fd, dst));
	CHECK_OK(destroy(fd, dst2));
	close(fd);
	big_free(&b);
	munmap((void *)sh, PAGE);
	munmap(small, PAGE);
	rc = pins_settled(before);
	CHECK(rc == before, "pins held %ld before, %d after", before, rc);
}

/* ------------------------------------------------- 4. memory cgroup */

#define CGROOT "/sys/fs/cgroup"
#define CG CGROOT "/knem-trust"

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

/* The value of @key in the flat-keyed file @path, or -1. */
static long keyed_value(const char *path, const char *key)
{
	char line[256], k[64];
	long v, found = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %ld", k, &v) == 2 && !strcmp(k, key))
			found = v;
	fclose(f);
	return found;
}

/* cgroup2 at /sys/fs/cgroup with the memory controller for children. */
static const char *memcg_setup(void)
{
	struct statfs sf;
	char ctl[256] = "";
	int fd;
	ssize_t n;

	if (statfs(CGROOT, &sf) || sf.f_type != CGROUP2_SUPER_MAGIC) {
		mkdir(CGROOT, 0755);
		if (mount("cgroup2", CGROOT, "cgroup2", 0, NULL))
			return "cannot mount cgroup2 at " CGROOT;
	}
	fd = open(CGROOT "/cgroup.controllers", O_RDONLY);
	n = fd < 0 ? -1 : read(fd, ctl, sizeof(ctl) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0 || !strstr(ctl, "memory"))
		return "the kernel lacks the memory cgroup controller";
	if (write_file(CGROOT "/cgroup.subtree_control", "+memory"))
		return "cannot enable the memory controller";
	rmdir(CG);
	if (mkdir(CG, 0755) || write_file(CG "/memory.max", "8M"))
		return "cannot make a memory cgroup of 8 MiB";
	return NULL;
}

enum { FLOOD_FDS = 64 };

/*
 * In the cgroup: map a 1 MiB status array on each descriptor until one is
 * refused, then, those closed, create regions of 1,024 pages (an 8 KiB
 * page array each) until one is refused.  Everything the child needs
 * otherwise (descriptors, buffers) is allocated before it joins, so that
 * only the driver's allocations meet the limit.
 */
static int memcg_flood(volatile uint64_t *sh)
{
	unsigned char *buf = buf_alloc(4 * MIB);
	void *maps[FLOOD_FDS];
	int fds[FLOOD_FDS], i, arrays = 0, regions = 0, fd;
	knem_cookie_t c;
	char pid[32];

	for (i = 0; i < FLOOD_FDS; i++)
		if ((fds[i] = dev_open()) < 0)
			return 1;
	fd = dev_open();
	snprintf(pid, sizeof(pid), "%d", getpid());
	if (fd < 0 || write_file(CG "/cgroup.procs", pid))
		return 2;
	for (i = 0; i < FLOOD_FDS; i++) {
		maps[i] = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_SHARED,
			       fds[i], 0);
		if (maps[i] == MAP_FAILED)
			break;
		arrays++;
	}
	sh[0] = arrays;
	sh[1] = arrays < FLOOD_FDS ? errno : 0;
	/* A mapping holds its file, and the file its array. */
	for (i = 0; i < arrays; i++)
		munmap(maps[i], MIB);
	for (i = 0; i < FLOOD_FDS; i++)
		close(fds[i]);
	while (region(fd, buf, 4 * MIB, PROT_READ, 0, &c) == 0)
		regions++;
	sh[2] = regions;
	sh[3] = errno;
	close(fd);
	return 0;
}

static void test_memcg_flood(void)
{
	volatile uint64_t *sh = shared_page();
	const char *why = memcg_setup();
	int rc;
	pid_t pid;

	CHECK(!why, "%s", why);
	pid = fork();
	if (pid == 0) {
		alarm(300);
		_exit(memcg_flood(sh));
	}
	rc = child_status(pid);
	printf("    %lu status arrays of 1 MiB (then errno %lu), %lu regions "
	       "(then errno %lu) in 8 MiB; memory.events oom %ld oom_kill %ld\n",
	       (unsigned long)sh[0], (unsigned long)sh[1],
	       (unsigned long)sh[2], (unsigned long)sh[3],
	       keyed_value(CG "/memory.events", "oom"),
	       keyed_value(CG "/memory.events", "oom_kill"));
	CHECK(rc == 0, "flooding child exit %d (1 open, 2 cgroup join, "
	      "137 killed)", rc);
	CHECK(keyed_value(CG "/memory.events", "oom_kill") == 0,
	      "memory.events oom_kill %ld, want 0",
	      keyed_value(CG "/memory.events", "oom_kill"));
	CHECK(sh[0] > 0 && sh[0] < FLOOD_FDS && sh[1] == ENOMEM,
	      "%lu of %d status arrays of 1 MiB fit in 8 MiB, then errno %lu, "
	      "want ENOMEM", (unsigned long)sh[0], FLOOD_FDS,
	      (unsigned long)sh[1]);
	CHECK(sh[2] > 0 && sh[3] == ENOMEM, "%lu regions, then errno %lu, "
	      "want ENOMEM", (unsigned long)sh[2], (unsigned long)sh[3]);
	CHECK_OK(rmdir(CG));
	munmap((void *)sh, PAGE);
}

/* ------------------------------------------------ 5. region flood */

/*
 * Empty regions pin nothing: max_user_regions alone bounds them.  The
 * default (131072) is 8,192 here for the emulated guest's sake: the same
 * check of the same counter.
 */
static void test_region_flood(void)
{
	volatile uint64_t *sh = shared_page();
	long saved = param_value("knem", "max_user_regions"), bound = 8192;
	char text[32];
	int rc;
	pid_t pid;

	CHECK(saved > 0, "no max_user_regions parameter");
	set_param("knem", "max_user_regions", "8192");
	CHECK(param_value("knem", "max_user_regions") == bound,
	      "max_user_regions not set to %ld", bound);
	pid = fork();
	if (pid == 0) {
		struct knem_cmd_create_region cr = { .protection = PROT_READ };
		uint64_t made = 0;
		int fd;

		alarm(300);
		if (setuid(NOBODY))
			_exit(10);
		fd = dev_open();
		while (ioctl(fd, KNEM_CMD_CREATE_REGION, &cr) == 0 &&
		       made <= (uint64_t)bound)
			made++;
		sh[0] = made;
		sh[1] = errno;
		close(fd);
		/* Room again once they are gone. */
		fd = dev_open();
		_exit(ioctl(fd, KNEM_CMD_CREATE_REGION, &cr) ? 11 : 0);
	}
	rc = child_status(pid);
	snprintf(text, sizeof(text), "%ld", saved);
	set_param("knem", "max_user_regions", text);
	CHECK(rc == 0, "child exit %d (11: no region after the flood closed)",
	      rc);
	CHECK(sh[0] == (uint64_t)bound && sh[1] == ENOSPC,
	      "%lu empty regions, then errno %lu; want %ld, then ENOSPC",
	      (unsigned long)sh[0], (unsigned long)sh[1], bound);
	munmap((void *)sh, PAGE);
}

/* ---------------------------------------------- 6. NOTIFY_FD order */

/*
 * 1,024 NOTIFY_FD copies alternating 64 KiB and 0 bytes (a short one
 * would overtake a long one if they ran side by side), unbound and then
 * bound to both CPUs: the indexes come back in submission order.
 */
static void notify_order(int bind)
{
	enum { COPIES = 1024, FIRST = 3000 };
	const size_t n = 64 * 1024;
	struct knem_cmd_bind_offload bo = { .flags = KNEM_BIND_FLAG_CURRENT };
	unsigned char *p = buf_alloc(n), *q = buf_alloc(n);
	uint32_t got[COPIES], i, st;
	void *slots;
	knem_cookie_t c;
	int fd = dev_open();
	ssize_t r;

	if (bind)
		CHECK_OK(ioctl(fd, KNEM_CMD_BIND_OFFLOAD, &bo));
	slots = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	pattern(p, n, 6);
	CHECK_OK(region(fd, p, n, PROT_READ, 0, &c));
	for (i = 0; i < COPIES; i++)
		CHECK_OK(inline_copy(fd, q, i % 2 ? 0 : n, 0, c, 0,
				     KNEM_FLAG_MEMCPYTHREAD |
				     KNEM_FLAG_NOTIFY_FD, FIRST + i, &st));
	r = read(fd, got, sizeof(got));
	CHECK(r == (ssize_t)sizeof(got), "read %zd: %s", r, strerror(errno));
	for (i = 0; i < COPIES; i++)
		CHECK(got[i] == FIRST + i, "%s: notification %u is index %u, "
		      "want %u", bind ? "bound" : "unbound", i, got[i],
		      FIRST + i);
	CHECK(same_pattern(q, n, 0, 6), "data");
	close(fd);
	munmap(slots, PAGE);
	munmap(p, n);
	munmap(q, n);
}

static void test_notify_order(void)
{
	notify_order(0);
	if (!case_failed)
		notify_order(1);
}

/* ------------------------------------------- 7. a DMA engine stuck */

/*
 * softdma stalled and refusing dmaengine_terminate_*(): a DMATHREAD copy
 * fails at dma_timeout_ms (slot FAILED) instead of waiting for the engine,
 * its pages stay pinned while the engine may still write them, and are
 * unpinned once the engine runs again and completes the descriptors.
 */
static void test_dma_stuck_engine(void)
{
	size_t n = 8 * PAGE;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	volatile knem_status_t *slots;
	long pinned = stat_value("pinned pages"), stuck;
	knem_cookie_t c;
	uint32_t st;
	int fd = dev_open(), i;

	CHECK(have_dma(), "lacks a DMA_MEMCPY channel: softdma not loaded");
	slots = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	pattern(src, n, 7);
	CHECK_OK(region(fd, src, n, PROT_READ, 0, &c));
	set_param("knem", "dma_timeout_ms", "300");
	set_param("softdma", "stall", "1");
	set_param("softdma", "refuse_terminate", "1");
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 0,
			     KNEM_FLAG_DMA | KNEM_FLAG_DMATHREAD, 0, &st));
	CHECK(st == KNEM_STATUS_PENDING, "status %u", st);
	CHECK(wait_slot(&slots[0]) == KNEM_STATUS_FAILED, "slot %u", slots[0]);
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 0, KNEM_FLAG_DMA, 0, &st));
	CHECK(st == KNEM_STATUS_FAILED, "synchronous copy status %u", st);
	CHECK_OK(destroy(fd, c));
	/* Both copies' destinations (8 pages each) and the source. */
	stuck = stat_value("pinned pages");
	set_param("softdma", "refuse_terminate", "0");
	set_param("softdma", "stall", "0");
	set_param("knem", "dma_timeout_ms", "10000");
	CHECK(stuck == pinned + 24, "pinned pages %ld before, %ld with the "
	      "engine stuck, want %ld", pinned, stuck, pinned + 24);
	for (i = 0; i < 500 && stat_value("pinned pages") != pinned; i++)
		usleep(10000);
	CHECK(stat_value("pinned pages") == pinned, "pinned pages %ld after "
	      "the engine ran, want %ld", stat_value("pinned pages"), pinned);
	CHECK(same_pattern(dst, n, 0, 7), "the engine's late copy");
	close(fd);
	munmap((void *)slots, PAGE);
	munmap(src, n);
	munmap(dst, n);
}

/* ------------------------------------------------------ 8. unload */

/* Nothing of the cases above keeps the module loaded. */
static void test_unload(void)
{
	const char *reload = getenv("KNEMESIS_SOFTDMA_RELOAD");
	char cmd[512];

	CHECK(reload, "lacks KNEMESIS_SOFTDMA_RELOAD: not in a ci/ guest");
	snprintf(cmd, sizeof(cmd), "%s", reload);
	CHECK(system(cmd) == 0, "%s: rmmod knem and insmod again failed",
	      reload);
	CHECK(!access(KNEM_DEVICE_FILENAME, F_OK), "no /dev/knem after reload");
}

static const struct tcase cases[] = {
	{ "TestOtherUid", test_other_uid },
	{ "TestMemlockAfterExit", test_memlock_after_exit },
	{ "TestKillCPUCopy", test_kill_cpu_copy },
	{ "TestKillQueuedCopy", test_kill_queued_copy },
	{ "TestMemcgFlood", test_memcg_flood },
	{ "TestRegionFlood", test_region_flood },
	{ "TestNotifyOrder", test_notify_order },
	{ "TestDMAStuckEngine", test_dma_stuck_engine },
	{ "TestUnload", test_unload },
};

int main(void)
{
	return ktest_main(cases, sizeof(cases) / sizeof(cases[0]));
}
