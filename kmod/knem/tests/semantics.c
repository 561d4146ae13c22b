// SPDX-License-Identifier: GPL-2.0
/*
 * semantics - the KNEM 1.1 behaviours clients depend on, the resource
 * bounds that replace per-descriptor caps, and the DMA fault handling,
 * each checked with exact errno values in a guest with knem and softdma
 * loaded (run as root; cases drop to uid 65534 in children).
 *
 *   semantics              (extra arguments such as -test.* are ignored)
 *
 * Each case is a program that would have hung or wrongly succeeded on
 * the driver before these behaviours: a copy readable after setuid, a
 * NOTIFY_FD queue of a fixed 4096 entries answering EAGAIN, a read()
 * returning 4 bytes when 8 were asked, ENOSPC at the 4097th region,
 * EINVAL for an iovec over 2 GiB, a status slot left PENDING, SUCCESS
 * reported over a failed DMA descriptor, a stalled DMA channel hanging,
 * an offloaded copy running on a CPU its submitter may not use, a
 * writable long-term pin of a written-back shared file mapping on 6.1.
 */
#include "ktest.h"

#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/statfs.h>

#define PAGE 4096UL

static void setup_child_limits(void)
{
	/* A child that fails a CHECK must not run the parent's cases. */
	alarm(120);
}

static int child_status(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ------------------------------------------------------ 1. caller's uid */

/*
 * Root opens the device and creates a region, then a child drops to uid
 * 65534 and uses the same descriptor: EPERM for root's region, success
 * with ANY_USER_ACCESS.  A region the child creates through that
 * descriptor belongs to uid 65534, so root gets EPERM for it.
 */
static void test_caller_uid(void)
{
	size_t n = 3 * PAGE;
	unsigned char *p = buf_alloc(n), *q = buf_alloc(n);
	volatile knem_cookie_t *shared = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
					     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	knem_cookie_t c, cany;
	uint32_t st;
	int fd = dev_open(), rc;
	pid_t pid;

	pattern(p, n, 1);
	CHECK_OK(region(fd, p, n, PROT_READ, 0, &c));
	CHECK_OK(region(fd, p, n, PROT_READ, KNEM_FLAG_ANY_USER_ACCESS, &cany));
	pid = fork();
	if (pid == 0) {
		knem_cookie_t mine;

		setup_child_limits();
		if (setuid(65534))
			_exit(10);
		if (inline_copy(fd, q, n, 0, c, 0, 0, 0, &st) != -1 ||
		    errno != EPERM)
			_exit(11);
		if (inline_copy(fd, q, n, 0, cany, 0, 0, 0, &st) ||
		    st != KNEM_STATUS_SUCCESS || !same_pattern(q, n, 0, 1))
			_exit(12);
		if (region(fd, q, n, PROT_READ, 0, &mine))
			_exit(13);
		shared[0] = mine;
		_exit(0);
	}
	rc = child_status(pid);
	CHECK(rc == 0, "child exit %d (11: root's region readable after setuid, "
	      "12: ANY_USER_ACCESS refused, 13: create failed)", rc);
	CHECK_ERR(inline_copy(fd, q, n, 0, shared[0], 0, 0, 0, &st), EPERM);
	/* The descriptor's owner still destroys it. */
	CHECK_OK(destroy(fd, shared[0]));
	close(fd);
	munmap((void *)shared, PAGE);
	munmap(p, n);
	munmap(q, n);
}

/* -------------------------------------------------------- 2. NOTIFY_FD */

static int notify_copy(int fd, void *dst, size_t n, knem_cookie_t c,
		       uint32_t flags, uint32_t idx, uint32_t *st)
{
	return inline_copy(fd, dst, n, 0, c, 0, flags, idx, st);
}

#define NOTIFY (KNEM_FLAG_MEMCPYTHREAD | KNEM_FLAG_NOTIFY_FD)

static void test_notify_flags(void)
{
	unsigned char *p = buf_alloc(PAGE), *q = buf_alloc(PAGE);
	void *slots;
	knem_cookie_t c;
	uint32_t st;
	int fd = dev_open();

	slots = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	CHECK_OK(region(fd, p, PAGE, PROT_READ, 0, &c));
	CHECK_ERR(notify_copy(fd, q, PAGE, c, KNEM_FLAG_NOTIFY_FD, 1, &st),
		  EINVAL);
	CHECK_ERR(notify_copy(fd, q, PAGE, c, KNEM_FLAG_NOTIFY_FD |
			      KNEM_FLAG_PINLOCAL, 1, &st), EINVAL);
	CHECK_ERR(notify_copy(fd, q, PAGE, c, NOTIFY |
			      KNEM_FLAG_ASYNCDMACOMPLETE, 1, &st), EINVAL);
	CHECK_ERR(notify_copy(fd, q, PAGE, c, KNEM_FLAG_NOTIFY_FD |
			      KNEM_FLAG_DMA | KNEM_FLAG_DMATHREAD |
			      KNEM_FLAG_ASYNCDMACOMPLETE, 1, &st), EINVAL);
	close(fd);
	munmap(slots, PAGE);
	munmap(p, PAGE);
	munmap(q, PAGE);
}

/*
 * The queue holds as many indexes as there are slots (8192 here, twice
 * the old fixed depth): the 8193rd submission is EBUSY, and one blocking
 * read() of 32768 bytes returns every index.
 */
static void test_notify_depth(void)
{
	const uint32_t nslots = 2 * PAGE;
	unsigned char *p = buf_alloc(PAGE), *q = buf_alloc(PAGE);
	volatile knem_status_t *slots;
	uint32_t *got = malloc(nslots * sizeof(*got)), i, st;
	unsigned char *seen = calloc(nslots, 1);
	knem_cookie_t c;
	int fd = dev_open();
	ssize_t r;

	slots = mmap(NULL, nslots, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	pattern(p, PAGE, 2);
	CHECK_OK(region(fd, p, PAGE, PROT_READ, 0, &c));
	for (i = 0; i < nslots; i++) {
		CHECK_OK(notify_copy(fd, q, 64, c, NOTIFY, i, &st));
		CHECK(st == KNEM_STATUS_PENDING, "copy %u status %u", i, st);
	}
	CHECK_ERR(notify_copy(fd, q, 64, c, NOTIFY, 0, &st), EBUSY);
	r = read(fd, got, nslots * sizeof(*got));
	CHECK(r == (ssize_t)(nslots * sizeof(*got)), "read %zd: %s", r,
	      strerror(errno));
	for (i = 0; i < nslots; i++) {
		CHECK(got[i] < nslots && !seen[got[i]], "index %u twice or bad",
		      got[i]);
		seen[got[i]] = 1;
		CHECK(slots[got[i]] == KNEM_STATUS_SUCCESS, "slot %u = %u",
		      got[i], slots[got[i]]);
	}
	CHECK(same_pattern(q, 64, 0, 2), "data");
	/* Room again. */
	CHECK_OK(notify_copy(fd, q, 64, c, NOTIFY, 5, &st));
	CHECK(read(fd, got, 4) == 4 && got[0] == 5, "index after drain");
	close(fd);
	munmap((void *)slots, nslots);
	free(got);
	free(seen);
	munmap(p, PAGE);
	munmap(q, PAGE);
}

/*
 * read() of 8 bytes waits for two indexes, not one; a count that is not a
 * multiple of 4 is EINVAL; O_NONBLOCK returns what is queued or EAGAIN;
 * poll() is POLLERR without a status array.
 */
static void test_notify_read(void)
{
	unsigned char *p = buf_alloc(PAGE), *q = buf_alloc(PAGE);
	volatile knem_status_t *slots;
	struct pollfd pfd;
	uint32_t got[2], st;
	knem_cookie_t c;
	int fd = dev_open(), rc, i;
	pid_t pid;

	pfd.fd = fd;
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 0) == 1 && pfd.revents == POLLERR,
	      "poll without status array: revents %#x", pfd.revents);
	slots = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	CHECK(poll(&pfd, 1, 0) == 0, "poll with nothing queued: %#x",
	      pfd.revents);
	CHECK_OK(region(fd, p, PAGE, PROT_READ, 0, &c));
	CHECK_ERR(read(fd, got, 6), EINVAL);
	CHECK_ERR(read(fd, got, 3), EINVAL);
	pid = fork();
	if (pid == 0) {
		setup_child_limits();
		if (read(fd, got, 8) != 8)
			_exit(1);
		_exit(got[0] == 11 && got[1] == 12 ? 0 : 2);
	}
	CHECK_OK(notify_copy(fd, q, 100, c, NOTIFY, 11, &st));
	/* One index is queued: the reader must still be blocked. */
	for (i = 0; i < 50 && slots[11] != KNEM_STATUS_SUCCESS; i++)
		usleep(10000);
	usleep(300000);
	CHECK(waitpid(pid, &rc, WNOHANG) == 0,
	      "read of 8 bytes returned with one index queued (status %#x)", rc);
	CHECK_OK(notify_copy(fd, q, 100, c, NOTIFY, 12, &st));
	rc = child_status(pid);
	CHECK(rc == 0, "blocked reader exit %d", rc);
	/* O_NONBLOCK: what is there, or EAGAIN. */
	CHECK_OK(fcntl(fd, F_SETFL, O_NONBLOCK));
	CHECK_ERR(read(fd, got, 8), EAGAIN);
	CHECK_OK(notify_copy(fd, q, 100, c, NOTIFY, 13, &st));
	CHECK(poll(&pfd, 1, 10000) == 1 && pfd.revents == POLLIN, "poll");
	CHECK(read(fd, got, 8) == 4 && got[0] == 13, "non-blocking read");
	close(fd);
	munmap((void *)slots, PAGE);
	munmap(p, PAGE);
	munmap(q, PAGE);
}

/*
 * Two processes read the same descriptor concurrently, 16 bytes at a
 * time, while 64 copies complete: every read returns exactly 16 bytes
 * and each index arrives once.
 */
static void test_notify_concurrent_readers(void)
{
	enum { COPIES = 64, READERS = 2, PER_READ = 4 };
	unsigned char *p = buf_alloc(PAGE), *q = buf_alloc(PAGE);
	uint32_t *out = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
			     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned char seen[COPIES] = { 0 };
	volatile knem_status_t *slots;
	knem_cookie_t c;
	pid_t pid[READERS];
	uint32_t st, i;
	int fd = dev_open(), r, rc;

	slots = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	CHECK_OK(region(fd, p, PAGE, PROT_READ, 0, &c));
	for (r = 0; r < READERS; r++) {
		pid[r] = fork();
		if (pid[r] == 0) {
			uint32_t *mine = out + r * (COPIES / READERS);
			int k;

			setup_child_limits();
			for (k = 0; k < COPIES / READERS / PER_READ; k++)
				if (read(fd, mine + k * PER_READ,
					 PER_READ * 4) != PER_READ * 4)
					_exit(1);
			_exit(0);
		}
	}
	for (i = 0; i < COPIES; i++)
		CHECK_OK(notify_copy(fd, q, 64, c, NOTIFY, i, &st));
	for (r = 0; r < READERS; r++) {
		rc = child_status(pid[r]);
		CHECK(rc == 0, "reader %d exit %d (1: short or empty read)", r,
		      rc);
	}
	for (i = 0; i < COPIES; i++) {
		CHECK(out[i] < COPIES && !seen[out[i]], "index %u", out[i]);
		seen[out[i]] = 1;
	}
	close(fd);
	munmap((void *)slots, PAGE);
	munmap(out, PAGE);
	munmap(p, PAGE);
	munmap(q, PAGE);
}

/* ------------------------------------------------- 3. no per-file caps */

/*
 * 100,000 one-page regions on one descriptor (a registration cache's
 * worth), over 16,384 distinct pages, each readable by its cookie.
 */
static void test_many_regions(void)
{
	enum { REGIONS = 100000, PAGES = 16384 };
	size_t n = PAGES * PAGE;
	unsigned char *p = buf_alloc(n), *q = buf_alloc(PAGE);
	knem_cookie_t *c = calloc(REGIONS, sizeof(*c));
	long created = stat_value("regions created");
	uint32_t st, i;
	int fd = dev_open();

	pattern(p, n, 3);
	for (i = 0; i < REGIONS; i++)
		CHECK_OK(region(fd, p + (i % PAGES) * PAGE, PAGE, PROT_READ, 0,
				&c[i]));
	CHECK(stat_value("regions created") == created + REGIONS, "created");
	for (i = 0; i < REGIONS; i += 997) {
		CHECK_OK(inline_copy(fd, q, PAGE, 0, c[i], 0, 0, 0, &st));
		CHECK(st == KNEM_STATUS_SUCCESS &&
		      same_pattern(q, PAGE, (i % PAGES) * PAGE, 3),
		      "region %u data", i);
	}
	for (i = 0; i < REGIONS; i += 2)
		CHECK_OK(destroy(fd, c[i]));
	CHECK_ERR(inline_copy(fd, q, PAGE, 0, c[0], 0, 0, 0, &st), EINVAL);
	CHECK_OK(inline_copy(fd, q, PAGE, 0, c[REGIONS - 1], 0, 0, 0, &st));
	close(fd);		/* destroys the other 50,000 */
	free(c);
	munmap(p, n);
	munmap(q, PAGE);
}

/*
 * One iovec of 2 GiB + 32 MiB: a 32 MiB memfd mapped 65 times end to end
 * (the guest has 1 GiB), pinned as one region; bytes past 2 GiB read back.
 */
static void test_huge_iovec(void)
{
	const size_t chunk = 32UL << 20, copies = 65, n = chunk * copies;
	unsigned char *base, *src, *q = buf_alloc(1 << 16);
	knem_cookie_t c;
	uint64_t off = (2UL << 30) + 12345;
	uint32_t st;
	size_t i;
	int mfd = memfd_create("knem-huge", 0), fd = dev_open();

	CHECK(mfd >= 0 && !ftruncate(mfd, chunk), "memfd: %s", strerror(errno));
	src = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	CHECK(src != MAP_FAILED, "mmap memfd");
	pattern(src, chunk, 4);
	base = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(base != MAP_FAILED, "reserve %zu bytes", n);
	for (i = 0; i < copies; i++)
		CHECK(mmap(base + i * chunk, chunk, PROT_READ, MAP_SHARED |
			   MAP_FIXED, mfd, 0) != MAP_FAILED, "map %zu", i);
	CHECK_OK(region(fd, base, n, PROT_READ, 0, &c));
	CHECK_OK(inline_copy(fd, q, 1 << 16, 0, c, off, 0, 0, &st));
	CHECK(st == KNEM_STATUS_SUCCESS &&
	      same_pattern(q, 1 << 16, off % chunk, 4), "data past 2 GiB");
	CHECK_OK(destroy(fd, c));
	close(fd);
	munmap(base, n);
	munmap(src, chunk);
	close(mfd);
	munmap(q, 1 << 16);
}

/*
 * Pinned pages count against RLIMIT_MEMLOCK (pinned_vm): a user limited
 * to 16 pages pins 16, not 17, through regions and PINLOCAL copies alike
 * (ENOMEM); CAP_IPC_LOCK is exempt.
 */
static void test_memlock(void)
{
	unsigned char *p = buf_alloc(32 * PAGE);
	struct rlimit lim = { 16 * PAGE, 16 * PAGE };
	int rc;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		knem_cookie_t a, b, root;
		uint32_t st;
		int fd;

		setup_child_limits();
		if (setrlimit(RLIMIT_MEMLOCK, &lim))
			_exit(9);
		/* Root keeps CAP_IPC_LOCK: 32 pages over a 16-page limit. */
		fd = dev_open();
		if (region(fd, p, 32 * PAGE, PROT_READ, 0, &root))
			_exit(10);
		close(fd);
		if (setuid(65534))
			_exit(11);
		fd = dev_open();
		if (region(fd, p, 16 * PAGE, PROT_READ, 0, &a))
			_exit(12);
		if (region(fd, p, PAGE, PROT_READ, 0, &b) != -1 ||
		    errno != ENOMEM)
			_exit(13);
		if (inline_copy(fd, p + 16 * PAGE, PAGE, 0, a, 0,
				KNEM_FLAG_PINLOCAL, 0, &st) != -1 ||
		    errno != ENOMEM)
			_exit(14);
		if (destroy(fd, a) || region(fd, p, PAGE, PROT_READ, 0, &b))
			_exit(15);
		_exit(0);
	}
	rc = child_status(pid);
	CHECK(rc == 0, "child exit %d (10: CAP_IPC_LOCK not exempt, 13/14: "
	      "over RLIMIT_MEMLOCK accepted, 15: not uncharged)", rc);
	munmap(p, 32 * PAGE);
}

/* ------------------------------------------------ 4. slots end final */

/*
 * An asynchronous copy finished inside the ioctl (0 bytes) leaves its slot
 * final too; with NOTIFY_FD a 0-byte copy is still notified.
 */
static void test_slot_final(void)
{
	unsigned char *p = buf_alloc(PAGE), *q = buf_alloc(PAGE);
	volatile knem_status_t *slots;
	knem_cookie_t c;
	uint32_t st, idx;
	int fd = dev_open();

	slots = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	CHECK_OK(region(fd, p, PAGE, PROT_READ, 0, &c));
	slots[3] = KNEM_STATUS_PENDING;
	CHECK_OK(inline_copy(fd, q, PAGE, 0, c, 2 * PAGE,
			     KNEM_FLAG_MEMCPYTHREAD, 3, &st));
	CHECK(st == KNEM_STATUS_SUCCESS, "0-byte copy status %u", st);
	CHECK(slots[3] == KNEM_STATUS_SUCCESS, "0-byte copy left slot %u",
	      slots[3]);
	slots[4] = KNEM_STATUS_FAILED;
	CHECK_OK(inline_copy(fd, q, PAGE, 0, c, 2 * PAGE, NOTIFY, 4, &st));
	CHECK(st == KNEM_STATUS_PENDING, "0-byte NOTIFY_FD copy status %u", st);
	CHECK(read(fd, &idx, 4) == 4 && idx == 4, "notification");
	CHECK(slots[4] == KNEM_STATUS_SUCCESS, "slot %u", slots[4]);
	close(fd);
	munmap((void *)slots, PAGE);
	munmap(p, PAGE);
	munmap(q, PAGE);
}

/*
 * Every way an asynchronous DMA copy can go - engine refusing descriptors
 * (the CPU redoes it) included - ends with the slot final.
 */
static void test_slot_final_dma_fallback(void)
{
	static const uint32_t flags[] = {
		KNEM_FLAG_DMA | KNEM_FLAG_ASYNCDMACOMPLETE,
		KNEM_FLAG_DMA | KNEM_FLAG_DMATHREAD,
	};
	size_t n = 64 * PAGE;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	volatile knem_status_t *slots;
	long before = stat_value("dma fallbacks to cpu");
	knem_cookie_t c;
	uint32_t st;
	unsigned int i;
	int fd = dev_open();

	if (!have_dma()) {
		skip_reason = "no DMA_MEMCPY channel (softdma not loaded)";
		return;
	}
	slots = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	pattern(src, n, 5);
	set_param("softdma", "max_queued", "3");
	for (i = 0; i < 2; i++) {
		CHECK_OK(strided_region(fd, src, 32, &c));
		memset(dst, 0, n);
		CHECK_OK(inline_copy(fd, dst, n / 2, 0, c, 0, flags[i], 20 + i,
				     &st));
		if (st == KNEM_STATUS_PENDING)
			st = wait_slot(&slots[20 + i]);
		CHECK(st == KNEM_STATUS_SUCCESS && slots[20 + i] == st,
		      "flags %#x: status %u, slot %u", flags[i], st,
		      slots[20 + i]);
		CHECK(strided_same(dst, src, 32), "fallback data");
		CHECK_OK(destroy(fd, c));
	}
	set_param("softdma", "max_queued", "1048576");
	CHECK(stat_value("dma fallbacks to cpu") == before + 2, "fallbacks");
	close(fd);
	munmap((void *)slots, PAGE);
	munmap(src, n);
	munmap(dst, n);
}

/* ------------------------------------------- 5. read-only descriptors */

static void test_read_only(void)
{
	static const unsigned long cmds[] = {
		KNEM_CMD_GET_INFO, KNEM_CMD_BIND_OFFLOAD, KNEM_CMD_INIT_SEND,
		KNEM_CMD_CREATE_REGION, KNEM_CMD_DESTROY_REGION,
		KNEM_CMD_INIT_ASYNC_RECV, KNEM_CMD_SYNC_RECV, KNEM_CMD_COPY,
		KNEM_CMD_INLINE_COPY, KNEM_CMD_COPY_BOUNDED,
		KNEM_CMD_INLINE_COPY_BOUNDED, _IOR('K', 0x7f, int),
	};
	unsigned char arg[64] = { 0 };
	char text[4096];
	struct pollfd pfd;
	unsigned int i;
	int fd = open(KNEM_DEVICE_FILENAME, O_RDONLY);

	CHECK(fd >= 0, "open: %s", strerror(errno));
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		CHECK(ioctl(fd, cmds[i], arg) == -1 && errno == EBADF,
		      "ioctl %#lx on a read-only descriptor: errno %d", cmds[i],
		      errno);
	CHECK(mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED &&
	      errno == EBADF, "status array mapped on a read-only descriptor");
	CHECK(read(fd, text, sizeof(text)) > 0 && strstr(text, "knem ABI"),
	      "statistics");
	pfd.fd = fd;
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 0) == 1 && pfd.revents == POLLIN, "poll");
	close(fd);
}

/* ----------------------------------- 6. BIND_OFFLOAD within the caller */

/*
 * Where a MEMCPYTHREAD copy of @c into @dst ran (the knem_copy event's
 * CPU), or -1 when it failed or left no event.
 */
static int offloaded_copy_cpu(int fd, volatile knem_status_t *slots,
			      knem_cookie_t c, void *dst, size_t n)
{
	uint32_t st;

	slots[0] = KNEM_STATUS_PENDING;
	if (trace_knem(1) ||
	    inline_copy(fd, dst, n, 0, c, 0, KNEM_FLAG_MEMCPYTHREAD, 0, &st) ||
	    st != KNEM_STATUS_PENDING ||
	    wait_slot(&slots[0]) != KNEM_STATUS_SUCCESS)
		return -1;
	return traced_cpu(1);
}

static int set_cpus(int a, int b)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(a, &set);
	CPU_SET(b, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static int bind_offload(int fd, uint32_t flags, const void *mask,
			uint32_t len)
{
	struct knem_cmd_bind_offload b = {
		.flags = flags, .mask_len = len, .mask_ptr = (uintptr_t)mask,
	};

	return ioctl(fd, KNEM_CMD_BIND_OFFLOAD, &b);
}

/*
 * Bound to CPU 0 by sched_setaffinity, the caller asks for CPU 1 (CUSTOM),
 * for the CPUs it may not use (CURRENT_REVERSED) and for none (an empty
 * CUSTOM mask): every request succeeds, as in KNEM 1.1, and every copy
 * runs on CPU 0.  Bound to CPU 1 while it may run on both, its copies run
 * on CPU 1 until it narrows its affinity to CPU 0, and there after that.
 * A mask longer than a page is read up to the kernel's cpumask size.
 */
static void bind_within_affinity(void)
{
	size_t n = 64 * 1024;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	static unsigned long long big[1024];
	unsigned long cpu1 = 1UL << 1;
	volatile knem_status_t *slots;
	knem_cookie_t c;
	int fd = dev_open(), cpu;

	pattern(src, n, 6);
	slots = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	CHECK_OK(region(fd, src, n, PROT_READ, 0, &c));
	CHECK_OK(set_cpus(0, 0));
	CHECK_OK(bind_offload(fd, KNEM_BIND_FLAG_CUSTOM, &cpu1, sizeof(cpu1)));
	cpu = offloaded_copy_cpu(fd, slots, c, dst, n);
	CHECK(cpu == 0, "CUSTOM {1} from a task on {0} ran on CPU %d", cpu);
	CHECK_OK(bind_offload(fd, KNEM_BIND_FLAG_CURRENT_REVERSED, NULL, 0));
	cpu = offloaded_copy_cpu(fd, slots, c, dst, n);
	CHECK(cpu == 0, "CURRENT_REVERSED from a task on {0} ran on CPU %d",
	      cpu);
	CHECK_OK(bind_offload(fd, KNEM_BIND_FLAG_CUSTOM, NULL, 0));
	cpu = offloaded_copy_cpu(fd, slots, c, dst, n);
	CHECK(cpu == 0, "an empty CUSTOM mask from a task on {0} ran on CPU %d",
	      cpu);

	CHECK_OK(set_cpus(0, 1));
	CHECK_OK(bind_offload(fd, KNEM_BIND_FLAG_CUSTOM, &cpu1, sizeof(cpu1)));
	cpu = offloaded_copy_cpu(fd, slots, c, dst, n);
	CHECK(cpu == 1, "CUSTOM {1} from a task on {0,1} ran on CPU %d", cpu);
	CHECK_OK(set_cpus(0, 0));
	cpu = offloaded_copy_cpu(fd, slots, c, dst, n);
	CHECK(cpu == 0, "bound to {1}, submitted from {0}: ran on CPU %d", cpu);
	CHECK_OK(set_cpus(0, 1));
	cpu = offloaded_copy_cpu(fd, slots, c, dst, n);
	CHECK(cpu == 1, "bound to {1}, submitted from {0,1}: ran on CPU %d",
	      cpu);

	big[0] = 1ULL << 1;
	CHECK_OK(bind_offload(fd, KNEM_BIND_FLAG_CUSTOM, big, sizeof(big)));
	cpu = offloaded_copy_cpu(fd, slots, c, dst, n);
	CHECK(cpu == 1, "CUSTOM {1} in an 8 KiB mask ran on CPU %d", cpu);
	trace_knem(0);
	CHECK_ERR(bind_offload(fd, KNEM_BIND_FLAG_CUSTOM, (void *)8, 8),
		  EFAULT);
	CHECK_ERR(bind_offload(fd, KNEM_BIND_FLAG_CUSTOM |
			       KNEM_BIND_FLAG_CURRENT, NULL, 0), EINVAL);
	CHECK(same_pattern(dst, n, 0, 6), "offloaded copy data");
	close(fd);
	munmap((void *)slots, PAGE);
	munmap(src, n);
	munmap(dst, n);
}

static void test_bind_within_affinity(void)
{
	cpu_set_t all;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		skip_reason = "needs 2 online CPUs";
		return;
	}
	CHECK_OK(sched_getaffinity(0, sizeof(all), &all));
	bind_within_affinity();
	trace_knem(0);
	sched_setaffinity(0, sizeof(all), &all);
}

/* ----------------------------------------------------- 7. DMA faults */

/*
 * An engine that keeps running after a failed descriptor: the last one
 * succeeds, yet the copy is FAILED (synchronous) and its slot never shows
 * SUCCESS (asynchronous).
 */
static void test_dma_keep_running(void)
{
	static const uint32_t flags[] = {
		KNEM_FLAG_DMA, KNEM_FLAG_DMA | KNEM_FLAG_ASYNCDMACOMPLETE,
		KNEM_FLAG_DMA | KNEM_FLAG_DMATHREAD,
	};
	size_t n = 128 * PAGE;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	volatile knem_status_t *slots;
	knem_cookie_t c;
	uint32_t st;
	unsigned int i, k, seen_success;
	int fd = dev_open();

	if (!have_dma()) {
		skip_reason = "no DMA_MEMCPY channel (softdma not loaded)";
		return;
	}
	slots = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	pattern(src, n, 6);
	CHECK_OK(strided_region(fd, src, 64, &c));
	set_param("softdma", "halt_on_error", "0");
	for (i = 0; i < 3; i++) {
		/*
		 * Every channel's 10th descriptor fails, never its last: the
		 * 64 descriptors are split over the guest's channels (2, at
		 * most 6 would keep this true).
		 */
		set_param("softdma", "fail_every", "10");
		slots[30] = KNEM_STATUS_PENDING;
		CHECK_OK(inline_copy(fd, dst, n / 2, 0, c, 0, flags[i], 30,
				     &st));
		seen_success = 0;
		for (k = 0; k < 20000 && st == KNEM_STATUS_PENDING &&
		     slots[30] == KNEM_STATUS_PENDING; k++)
			usleep(200);
		if (st == KNEM_STATUS_PENDING) {
			seen_success = slots[30] == KNEM_STATUS_SUCCESS;
			st = slots[30];
		}
		CHECK(st == KNEM_STATUS_FAILED && !seen_success,
		      "flags %#x: status %u over a failed descriptor", flags[i],
		      st);
	}
	set_param("softdma", "fail_every", "0");
	set_param("softdma", "halt_on_error", "1");
	close(fd);
	munmap((void *)slots, PAGE);
	munmap(src, n);
	munmap(dst, n);
}

/*
 * An engine demanding 64-byte alignment: the unaligned pieces are copied
 * by the CPU and the copy succeeds with the right data.
 */
static void test_dma_alignment(void)
{
	size_t n = 16 * PAGE + 77;
	unsigned char *src = buf_alloc(n + 64), *dst = buf_alloc(n + 64);
	long pieces = stat_value("dma pieces copied by cpu");
	knem_cookie_t c;
	uint32_t st;
	int fd = dev_open();

	if (!have_dma()) {
		skip_reason = "no DMA_MEMCPY channel (softdma not loaded)";
		return;
	}
	pattern(src, n + 64, 7);
	set_param("softdma", "copy_align", "6");
	CHECK_OK(region(fd, src + 1, n, PROT_READ, 0, &c));
	CHECK_OK(inline_copy(fd, dst + 3, n, 0, c, 0, KNEM_FLAG_DMA, 0, &st));
	set_param("softdma", "copy_align", "0");
	CHECK(st == KNEM_STATUS_SUCCESS, "status %u", st);
	CHECK(same_pattern(dst + 3, n, 1, 7), "data");
	CHECK(stat_value("dma pieces copied by cpu") > pieces,
	      "no piece copied by the CPU");
	close(fd);
	munmap(src, n + 64);
	munmap(dst, n + 64);
}

/*
 * A stalled channel: the synchronous copy and the DMATHREAD one fail after
 * dma_timeout_ms, the channel is terminated, nothing stays pinned.
 */
static void test_dma_stall(void)
{
	size_t n = 8 * PAGE;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	volatile knem_status_t *slots;
	long timeouts = stat_value("dma timeouts");
	knem_cookie_t c;
	uint32_t st;
	int fd = dev_open();

	if (!have_dma()) {
		skip_reason = "no DMA_MEMCPY channel (softdma not loaded)";
		return;
	}
	slots = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	CHECK_OK(region(fd, src, n, PROT_READ, 0, &c));
	set_param("knem", "dma_timeout_ms", "300");
	set_param("softdma", "stall", "1");
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 0, KNEM_FLAG_DMA, 0, &st));
	CHECK(st == KNEM_STATUS_FAILED, "stalled copy status %u", st);
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 0,
			     KNEM_FLAG_DMA | KNEM_FLAG_DMATHREAD, 1, &st));
	CHECK(st == KNEM_STATUS_PENDING, "status %u", st);
	CHECK(wait_slot(&slots[1]) == KNEM_STATUS_FAILED, "slot %u", slots[1]);
	set_param("softdma", "stall", "0");
	set_param("knem", "dma_timeout_ms", "10000");
	CHECK(stat_value("dma timeouts") == timeouts + 2, "timeouts %ld -> %ld",
	      timeouts, stat_value("dma timeouts"));
	/* The channel works again. */
	pattern(src, n, 8);
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 0, KNEM_FLAG_DMA, 0, &st));
	CHECK(st == KNEM_STATUS_SUCCESS && same_pattern(dst, n, 0, 8),
	      "copy after the stall: %u", st);
	close(fd);
	munmap((void *)slots, PAGE);
	munmap(src, n);
	munmap(dst, n);
}

/* ----------------------- 8. writable pins of written-back shared files */

/*
 * A shared mapping of a file on a filesystem that writes its pages back
 * (the minix image ci/test-kernel.sh mounts on a loop device at
 * $KNEMESIS_DISK) cannot be pinned for writing: EFAULT on every kernel,
 * as gup itself refuses it from 6.5 on (6.1 would pin it and let the
 * filesystem write back pages under a long-term pin).  Read-only pins of
 * it, writable pins of a private mapping of the same file, and a plain
 * synchronous copy into it (no pin) work.
 */
static void writable_file_pins(const char *dir)
{
	size_t n = 16 * PAGE;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	unsigned char *shared, *private;
	char path[4096];
	struct statfs sfs;
	knem_cookie_t c, csrc;
	uint32_t st;
	int fd = dev_open(), ffd;

	CHECK_OK(statfs(dir, &sfs));
	CHECK(sfs.f_type != TMPFS_MAGIC && sfs.f_type != RAMFS_MAGIC,
	      "%s is not a disk filesystem (f_type %#lx)", dir,
	      (unsigned long)sfs.f_type);
	snprintf(path, sizeof(path), "%s/knem-pin", dir);
	ffd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(ffd >= 0, "open %s: %s", path, strerror(errno));
	unlink(path);
	CHECK_OK(ftruncate(ffd, n));
	shared = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, ffd, 0);
	private = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE, ffd, 0);
	CHECK(shared != MAP_FAILED && private != MAP_FAILED, "mmap %s", path);
	pattern(shared, n, 9);
	pattern(src, n, 10);
	CHECK_OK(region(fd, src, n, PROT_READ, 0, &csrc));

	CHECK_ERR(region(fd, shared, n, PROT_WRITE, 0, &c), EFAULT);
	CHECK_ERR(region(fd, shared, n, PROT_READ | PROT_WRITE, 0, &c), EFAULT);
	CHECK_ERR(region(fd, shared + n / 2, PAGE, PROT_WRITE, 0, &c), EFAULT);
	CHECK_ERR(inline_copy(fd, shared, n, 0, csrc, 0, KNEM_FLAG_PINLOCAL, 0,
			      &st), EFAULT);
	CHECK(same_pattern(shared, n, 0, 9), "refused pin changed the file");

	CHECK_OK(region(fd, shared, n, PROT_READ, 0, &c));
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 0, 0, 0, &st));
	CHECK(st == KNEM_STATUS_SUCCESS && same_pattern(dst, n, 0, 9),
	      "read through a read-only pin of the file: status %u", st);
	CHECK_OK(destroy(fd, c));
	CHECK_OK(region(fd, private, n, PROT_READ | PROT_WRITE, 0, &c));
	CHECK_OK(destroy(fd, c));
	CHECK_OK(inline_copy(fd, shared, n, 0, csrc, 0, 0, 0, &st));
	CHECK(st == KNEM_STATUS_SUCCESS && same_pattern(shared, n, 0, 10),
	      "unpinned copy into the file: status %u", st);
	CHECK_OK(msync(shared, n, MS_SYNC));
	CHECK_OK(destroy(fd, csrc));
	munmap(shared, n);
	munmap(private, n);
	close(ffd);
	close(fd);
	munmap(src, n);
	munmap(dst, n);
}

static void test_writable_file_pins(void)
{
	const char *dir = getenv("KNEMESIS_DISK");

	if (!dir) {
		skip_reason = "no disk-backed filesystem (KNEMESIS_DISK unset; "
			      "ci/test-kernel.sh mounts one)";
		return;
	}
	writable_file_pins(dir);
}

static const struct tcase cases[] = {
	{ "TestCallerUid", test_caller_uid },
	{ "TestNotifyFlags", test_notify_flags },
	{ "TestNotifyDepth", test_notify_depth },
	{ "TestNotifyRead", test_notify_read },
	{ "TestNotifyConcurrentReaders", test_notify_concurrent_readers },
	{ "TestManyRegions", test_many_regions },
	{ "TestHugeIovec", test_huge_iovec },
	{ "TestMemlock", test_memlock },
	{ "TestSlotFinal", test_slot_final },
	{ "TestSlotFinalDMAFallback", test_slot_final_dma_fallback },
	{ "TestReadOnly", test_read_only },
	{ "TestDMAKeepRunning", test_dma_keep_running },
	{ "TestDMAAlignment", test_dma_alignment },
	{ "TestDMAStall", test_dma_stall },
	{ "TestBindWithinAffinity", test_bind_within_affinity },
	{ "TestWritableFilePins", test_writable_file_pins },
};

int main(void)
{
	return ktest_main(cases, sizeof(cases) / sizeof(cases[0]));
}
