// SPDX-License-Identifier: GPL-2.0
/*
 * abi_smoke - exercises every /dev/knem command and documented error path
 * in a guest with knem (and, for the DMA cases, softdma) loaded.
 *
 *   abi_smoke [-v]          (extra arguments such as -test.* are ignored)
 *
 * Output follows `go test -v` so the CI harness counts it like the Go
 * tests: "--- PASS: name", "--- FAIL: name", "--- SKIP: name (why)"; the
 * exit status is 1 when any case failed.  Data is checked byte for byte
 * against a pattern, errors against exact errno values, and the pinned
 * page count of the statistics must be back to its starting value at the
 * end of every case.
 */
#include "ktest.h"

/* ---------------------------------------------------------------- cases */

static void test_info(void)
{
	struct knem_cmd_info info;
	int fd = dev_open();
	int softdma = access("/sys/module/softdma", F_OK) == 0;

	CHECK(fd >= 0, "open: %s", strerror(errno));
	memset(&info, 0xff, sizeof(info));
	CHECK_OK(ioctl(fd, KNEM_CMD_GET_INFO, &info));
	CHECK(info.abi == 0xd, "abi %#x", info.abi);
	CHECK(!!(info.features & KNEM_FEATURE_DMA) == softdma,
	      "features %#x with softdma %s", info.features,
	      softdma ? "loaded" : "absent");
	CHECK(info.forced_flags == 0, "forced %#x", info.forced_flags);
	CHECK_ERR(ioctl(fd, _IOR('K', 0x7f, int), &info), ENOSYS);
	CHECK_ERR(ioctl(fd, KNEM_CMD_GET_INFO, (void *)8), EFAULT);
	close(fd);
}

static void test_inline_read_write(void)
{
	size_t n = 5 * 4096 + 123;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	knem_cookie_t c;
	uint32_t st;
	int fd = dev_open();

	pattern(src, n, 7);
	CHECK_OK(region(fd, src, n, PROT_READ | PROT_WRITE, 0, &c));
	CHECK(c != 0, "cookie 0");
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 0, 0, 0, &st));
	CHECK(st == KNEM_STATUS_SUCCESS, "status %u", st);
	CHECK(same_pattern(dst, n, 0, 7), "read data differs");
	/* offset: copy length = remote bytes left */
	memset(dst, 0, n);
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 1000, 0, 0, &st));
	CHECK(same_pattern(dst, n - 1000, 1000, 7) && dst[n - 1000] == 0,
	      "offset read wrong");
	/* offset past the end: 0 bytes, success */
	CHECK_OK(inline_copy(fd, dst, n, 0, c, n + 5, 0, 0, &st));
	CHECK(st == KNEM_STATUS_SUCCESS, "status %u", st);
	/* write direction, with PINLOCAL too */
	pattern(dst, n, 99);
	CHECK_OK(inline_copy(fd, dst, 4096, 1, c, 10, KNEM_FLAG_PINLOCAL, 0, &st));
	CHECK(same_pattern(src + 10, 4096, 0, 99) && same_pattern(src, 10, 0, 7),
	      "write data differs");
	CHECK_OK(destroy(fd, c));
	CHECK_ERR(destroy(fd, c), EINVAL);
	close(fd);
	munmap(src, n);
	munmap(dst, n);
}

static void test_bounded_and_iovecs(void)
{
	size_t n = 64 * 1024;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	struct knem_cmd_param_iovec iov[3] = {
		{ (uintptr_t)dst + 1, 100 }, { (uintptr_t)dst + 5000, 0 },
		{ (uintptr_t)dst + 8190, 20000 },
	};
	struct knem_cmd_inline_copy_bounded icb = {
		.local_iovec_array = (uintptr_t)iov, .local_iovec_nr = 3,
		.length = 10000,
	};
	knem_cookie_t c;
	int fd = dev_open();

	pattern(src, n, 3);
	CHECK_OK(region(fd, src, n, PROT_READ, 0, &c));
	icb.remote_cookie = c;
	icb.remote_offset = 50;
	CHECK_OK(ioctl(fd, KNEM_CMD_INLINE_COPY_BOUNDED, &icb));
	CHECK(icb.current_status == KNEM_STATUS_SUCCESS, "status");
	CHECK(same_pattern(dst + 1, 100, 50, 3), "iovec 0");
	CHECK(same_pattern(dst + 8190, 9900, 150, 3) && dst[8190 + 9900] == 0,
	      "iovec 2 / bound");
	CHECK(dst[0] == 0 && dst[101] == 0, "wrote outside iovecs");
	iov[0].len = (uint64_t)-1;	/* overflow */
	CHECK_ERR(ioctl(fd, KNEM_CMD_INLINE_COPY_BOUNDED, &icb), EFAULT);
	icb.local_iovec_nr = 100000;
	CHECK_ERR(ioctl(fd, KNEM_CMD_INLINE_COPY_BOUNDED, &icb), EINVAL);
	close(fd);
	munmap(src, n);
	munmap(dst, n);
}

static void test_region_copy(void)
{
	size_t n = 3 * 4096;
	unsigned char *a = buf_alloc(n), *b = buf_alloc(n);
	knem_cookie_t ca, cb, cro;
	struct knem_cmd_copy_bounded cpb = { 0 };
	struct knem_cmd_copy cp = { 0 };
	int fd = dev_open();

	pattern(a, n, 11);
	CHECK_OK(region(fd, a, n, PROT_READ, 0, &ca));
	CHECK_OK(region(fd, b, n, PROT_WRITE, 0, &cb));
	cp.src_cookie = ca;
	cp.dst_cookie = cb;
	cp.dst_offset = 100;
	CHECK_OK(ioctl(fd, KNEM_CMD_COPY, &cp));
	CHECK(cp.current_status == KNEM_STATUS_SUCCESS, "status");
	CHECK(same_pattern(b + 100, n - 100, 0, 11) && b[0] == 0, "copy data");
	memset(b, 0, n);
	cpb.src_cookie = ca;
	cpb.src_offset = 4000;
	cpb.dst_cookie = cb;
	cpb.length = 300;
	CHECK_OK(ioctl(fd, KNEM_CMD_COPY_BOUNDED, &cpb));
	CHECK(same_pattern(b, 300, 4000, 11) && b[300] == 0, "bounded data");
	/* protection: dst read-only, src write-only */
	CHECK_OK(region(fd, a, n, PROT_READ, 0, &cro));
	cp.dst_cookie = cro;
	CHECK_ERR(ioctl(fd, KNEM_CMD_COPY, &cp), EACCES);
	cp.src_cookie = cb;
	cp.dst_cookie = cb;
	CHECK_ERR(ioctl(fd, KNEM_CMD_COPY, &cp), EACCES);
	cp.src_cookie = 0;
	CHECK_ERR(ioctl(fd, KNEM_CMD_COPY, &cp), EINVAL);
	cp.src_cookie = ca ^ 1;
	CHECK_ERR(ioctl(fd, KNEM_CMD_COPY, &cp), EINVAL);
	close(fd);
	munmap(a, n);
	munmap(b, n);
}

static void test_errors(void)
{
	size_t n = 8192;
	unsigned char *p = buf_alloc(n), *ro;
	knem_cookie_t c;
	uint32_t st;
	int fd = dev_open(), fd2 = dev_open();
	struct knem_cmd_create_region cr = { 0 };
	void *slots;

	ro = mmap(NULL, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK_ERR(region(fd, ro, n, PROT_READ | PROT_WRITE, 0, &c), EFAULT);
	CHECK_OK(region(fd, ro, n, PROT_READ, 0, &c));
	CHECK_ERR(region(fd, (void *)0x1000, n, PROT_READ, 0, &c), EFAULT);
	CHECK_ERR(region(fd, (void *)-4096L, 4096, PROT_READ, 0, &c), EFAULT);
	CHECK_ERR(region(fd, p, n, PROT_READ | PROT_EXEC, 0, &c), EINVAL);
	CHECK_ERR(region(fd, p, n, PROT_READ, 1U << 12, &c), EINVAL);
	cr.iovec_array = 16;
	cr.iovec_nr = 1;
	cr.protection = PROT_READ;
	CHECK_ERR(ioctl(fd, KNEM_CMD_CREATE_REGION, &cr), EFAULT);
	CHECK_OK(region(fd, p, n, PROT_READ | PROT_WRITE, 0, &c));
	/* destroy from another file: EINVAL, the region stays */
	CHECK_ERR(destroy(fd2, c), EINVAL);
	CHECK_OK(inline_copy(fd2, p, 10, 0, c, 0, 0, 0, &st));
	/* bad local buffer of a copy */
	CHECK_ERR(inline_copy(fd, (void *)0x1000, 100, 0, c, 0, 0, 0, &st),
		  EFAULT);
	CHECK_ERR(inline_copy(fd, ro, 100, 0, c, 0, KNEM_FLAG_PINLOCAL, 0, &st),
		  EFAULT);
	CHECK_ERR(inline_copy(fd, p, 100, 0, c, 0, 1U << 9, 0, &st), EINVAL);
	{
		struct knem_cmd_param_iovec iov = { (uintptr_t)p, 10 };
		struct knem_cmd_inline_copy ic = {
			.local_iovec_array = (uintptr_t)&iov,
			.local_iovec_nr = 1, .write = 2, .remote_cookie = c,
		};

		CHECK_ERR(ioctl(fd, KNEM_CMD_INLINE_COPY, &ic), EINVAL);
	}
	/* async without a status array, and past its end */
	CHECK_ERR(inline_copy(fd, p, 100, 0, c, 0, KNEM_FLAG_MEMCPYTHREAD, 0,
			      &st), EINVAL);
	slots = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "status mmap: %s", strerror(errno));
	CHECK_ERR(inline_copy(fd, p, 100, 0, c, 0, KNEM_FLAG_MEMCPYTHREAD, 4096,
			      &st), EINVAL);
	CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) ==
	      MAP_FAILED && errno == EBUSY, "second mmap: %s", strerror(errno));
	CHECK(mmap(NULL, (1UL << 32) + 4096, PROT_READ | PROT_WRITE, MAP_SHARED,
		   fd2, 0) == MAP_FAILED && errno == EINVAL,
	      "huge mmap: %s", strerror(errno));
	CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 4096) ==
	      MAP_FAILED && errno == EINVAL, "offset mmap: %s", strerror(errno));
	/* the mapping keeps the file (and its regions) alive */
	munmap(slots, 4096);
	close(fd);
	close(fd2);
	munmap(p, n);
	munmap(ro, n);
}

static void test_singleuse_and_close(void)
{
	size_t n = 4096 * 4;
	unsigned char *p = buf_alloc(n), *q = buf_alloc(n);
	knem_cookie_t c, c2;
	uint32_t st;
	int fd = dev_open(), fd2 = dev_open();

	pattern(p, n, 5);
	CHECK_OK(region(fd, p, n, PROT_READ, KNEM_FLAG_SINGLEUSE, &c));
	CHECK_OK(inline_copy(fd2, q, n, 0, c, 0, 0, 0, &st));
	CHECK(same_pattern(q, n, 0, 5), "data");
	CHECK_ERR(inline_copy(fd2, q, n, 0, c, 0, 0, 0, &st), EINVAL);
	CHECK_ERR(destroy(fd, c), EINVAL);
	/* closing the owner destroys its regions */
	CHECK_OK(region(fd, p, n, PROT_READ, 0, &c2));
	close(fd);
	CHECK_ERR(inline_copy(fd2, q, n, 0, c2, 0, 0, 0, &st), EINVAL);
	close(fd2);
	munmap(p, n);
	munmap(q, n);
}

static void test_other_process(void)
{
	size_t n = 4096 * 3;
	unsigned char *p = buf_alloc(n);
	knem_cookie_t c, cany;
	int fd = dev_open(), status;
	pid_t pid;

	pattern(p, n, 21);
	CHECK_OK(region(fd, p, n, PROT_READ, 0, &c));
	CHECK_OK(region(fd, p, n, PROT_READ, KNEM_FLAG_ANY_USER_ACCESS, &cany));
	pid = fork();
	if (pid == 0) {
		unsigned char *q = buf_alloc(n);
		int cfd = dev_open();
		uint32_t st;

		/* same uid, another process and file */
		if (inline_copy(cfd, q, n, 0, c, 0, 0, 0, &st) ||
		    !same_pattern(q, n, 0, 21))
			_exit(10);
		close(cfd);
		if (setuid(65534))
			_exit(11);
		cfd = dev_open();
		if (cfd < 0)
			_exit(12);
		if (inline_copy(cfd, q, n, 0, c, 0, 0, 0, &st) != -1 ||
		    errno != EPERM)
			_exit(13);
		memset(q, 0, n);
		if (inline_copy(cfd, q, n, 0, cany, 0, 0, 0, &st) ||
		    !same_pattern(q, n, 0, 21))
			_exit(14);
		_exit(0);
	}
	CHECK(pid > 0, "fork");
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "child failed with %d (10 same uid, 13 EPERM, 14 ANY_USER_ACCESS)",
	      WEXITSTATUS(status));
	/* a process exiting without close releases its regions */
	pid = fork();
	if (pid == 0) {
		knem_cookie_t cc;
		int cfd = dev_open();

		_exit(region(cfd, p, n, PROT_READ, 0, &cc) ? 1 : 0);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && !WEXITSTATUS(status), "exit child");
	close(fd);
	munmap(p, n);
}

/*
 * MEMCPYTHREAD with and without NOTIFY_FD, and BIND_OFFLOAD: the offloaded
 * copy runs on the bound CPU (the knem_copy event's CPU says where).
 */
static void test_async_thread_notify(void)
{
	size_t n = 1 << 20;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	volatile knem_status_t *slots;
	struct knem_cmd_bind_offload bind = { .flags = KNEM_BIND_FLAG_CURRENT };
	unsigned long cpumask;
	knem_cookie_t c;
	uint32_t st, idx;
	struct pollfd pfd;
	int fd = dev_open(), cpu, want;

	pattern(src, n, 33);
	slots = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	CHECK_OK(ioctl(fd, KNEM_CMD_BIND_OFFLOAD, &bind));
	CHECK_OK(region(fd, src, n, PROT_READ, 0, &c));
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 0, KNEM_FLAG_MEMCPYTHREAD, 7, &st));
	CHECK(st == KNEM_STATUS_PENDING, "current_status %u", st);
	CHECK(wait_slot(&slots[7]) == KNEM_STATUS_SUCCESS, "slot %u", slots[7]);
	CHECK(same_pattern(dst, n, 0, 33), "async data");
	/* The copy runs on each CPU it is bound to in turn. */
	for (want = sysconf(_SC_NPROCESSORS_ONLN) - 1; want >= 0; want--) {
		CHECK(trace_knem(1) == 0, "cannot enable the knem_copy event");
		cpumask = 1UL << want;
		bind.flags = KNEM_BIND_FLAG_CUSTOM;
		bind.mask_len = sizeof(cpumask);
		bind.mask_ptr = (uintptr_t)&cpumask;
		CHECK_OK(ioctl(fd, KNEM_CMD_BIND_OFFLOAD, &bind));
		slots[8] = KNEM_STATUS_PENDING;
		CHECK_OK(inline_copy(fd, dst, n, 0, c, 0, KNEM_FLAG_MEMCPYTHREAD,
				     8, &st));
		CHECK(wait_slot(&slots[8]) == KNEM_STATUS_SUCCESS, "slot 8");
		cpu = traced_cpu(1);
		CHECK(cpu == want, "copy bound to CPU %d ran on CPU %d", want,
		      cpu);
	}
	trace_knem(0);
	bind.flags = 3;
	CHECK_ERR(ioctl(fd, KNEM_CMD_BIND_OFFLOAD, &bind), EINVAL);
	/* An empty mask is no error (KNEM 1.1): the caller's CPUs. */
	cpumask = 0;
	bind.flags = KNEM_BIND_FLAG_CUSTOM;
	CHECK_OK(ioctl(fd, KNEM_CMD_BIND_OFFLOAD, &bind));
	memset(dst, 0, n);
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 0,
			     KNEM_FLAG_MEMCPYTHREAD | KNEM_FLAG_NOTIFY_FD, 42, &st));
	CHECK(st == KNEM_STATUS_PENDING, "current_status %u", st);
	pfd.fd = fd;
	pfd.events = POLLIN;
	CHECK(poll(&pfd, 1, 10000) == 1, "poll");
	CHECK(read(fd, &idx, sizeof(idx)) == sizeof(idx), "read notify");
	CHECK(idx == 42, "notified index %u", idx);
	CHECK(slots[42] == KNEM_STATUS_SUCCESS, "slot 42 %u", slots[42]);
	CHECK(same_pattern(dst, n, 0, 33), "notify data");
	/* close while a copy is in flight: must not leak pins */
	CHECK_OK(inline_copy(fd, dst, n, 0, c, 0, KNEM_FLAG_MEMCPYTHREAD, 1, &st));
	CHECK_OK(destroy(fd, c));
	close(fd);
	munmap((void *)slots, 4096);
	munmap(src, n);
	munmap(dst, n);
}

static void test_old_api(void)
{
	size_t n = 10000;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	struct knem_cmd_param_iovec siov = { (uintptr_t)src, n };
	struct knem_cmd_param_iovec riov = { (uintptr_t)dst, n };
	struct knem_cmd_init_send_param is = {
		.send_iovec_array = (uintptr_t)&siov, .send_iovec_nr = 1,
	};
	struct knem_cmd_sync_recv_param sr = {
		.recv_iovec_array = (uintptr_t)&riov, .recv_iovec_nr = 1,
	};
	struct knem_cmd_init_async_recv_param ar = {
		.recv_iovec_array = (uintptr_t)&riov, .recv_iovec_nr = 1,
		.status_index = 3,
	};
	volatile knem_status_t *slots;
	int fd = dev_open();

	pattern(src, n, 77);
	CHECK_OK(ioctl(fd, KNEM_CMD_INIT_SEND, &is));
	CHECK(is.send_cookie, "cookie");
	sr.send_cookie = is.send_cookie;
	CHECK_OK(ioctl(fd, KNEM_CMD_SYNC_RECV, &sr));
	CHECK(sr.status == KNEM_STATUS_SUCCESS, "status %u", sr.status);
	CHECK(same_pattern(dst, n, 0, 77), "sync recv data");
	CHECK_ERR(ioctl(fd, KNEM_CMD_SYNC_RECV, &sr), EINVAL);
	CHECK_OK(ioctl(fd, KNEM_CMD_INIT_SEND, &is));
	ar.send_cookie = is.send_cookie;
	CHECK_ERR(ioctl(fd, KNEM_CMD_INIT_ASYNC_RECV, &ar), EINVAL);
	slots = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	memset(dst, 0, n);
	CHECK_OK(ioctl(fd, KNEM_CMD_INIT_ASYNC_RECV, &ar));
	CHECK(wait_slot(&slots[3]) == KNEM_STATUS_SUCCESS, "slot %u", slots[3]);
	CHECK(same_pattern(dst, n, 0, 77), "async recv data");
	close(fd);
	munmap((void *)slots, 4096);
	munmap(src, n);
	munmap(dst, n);
}

static long dma_copies(void)
{
	return stat_value("copies dma");
}

static void dma_case(uint32_t flags, int expect_async, const char *fail)
{
	size_t n = (1 << 20) + 333;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	volatile knem_status_t *slots;
	knem_cookie_t c, cd;
	struct knem_cmd_copy cp = { 0 };
	long before = dma_copies();
	uint32_t st;
	int fd = dev_open(), i;

	if (!have_dma()) {
		skip_reason = "no DMA_MEMCPY channel (softdma not loaded)";
		return;
	}
	slots = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	pattern(src, n, 55);
	set_param("softdma", "fail_every", fail ? fail : "0");
	CHECK_OK(region(fd, src + 1, n - 1, PROT_READ, 0, &c));
	CHECK_OK(inline_copy(fd, dst + 3, n - 3, 0, c, 0, flags, 9, &st));
	if (expect_async) {
		CHECK(st == KNEM_STATUS_PENDING, "current_status %u", st);
		st = wait_slot(&slots[9]);
	}
	set_param("softdma", "fail_every", "0");
	CHECK(st == (fail ? KNEM_STATUS_FAILED : KNEM_STATUS_SUCCESS),
	      "status %u", st);
	if (fail)
		goto out;
	CHECK(same_pattern(dst + 3, n - 3, 1, 55), "dma data");
	/* With ASYNCDMACOMPLETE the engine writes the slot before the CPU
	 * gets to account for the copy.
	 */
	for (i = 0; i < 1000 && dma_copies() != before + 1; i++)
		usleep(1000);
	CHECK(dma_copies() == before + 1, "dma copies %ld -> %ld", before,
	      dma_copies());
	/* region to region with DMA */
	memset(dst, 0, n);
	CHECK_OK(region(fd, dst, n, PROT_WRITE, 0, &cd));
	cp.src_cookie = c;
	cp.dst_cookie = cd;
	cp.flags = flags;
	cp.async_status_index = 10;
	CHECK_OK(ioctl(fd, KNEM_CMD_COPY, &cp));
	st = expect_async ? (uint32_t)wait_slot(&slots[10]) : cp.current_status;
	CHECK(st == KNEM_STATUS_SUCCESS, "copy status %u", st);
	CHECK(same_pattern(dst, n - 1, 1, 55), "dma region data");
out:
	close(fd);
	munmap((void *)slots, 4096);
	munmap(src, n);
	munmap(dst, n);
}

static void test_dma_sync(void) { dma_case(KNEM_FLAG_DMA, 0, NULL); }
static void test_dma_async_chained(void)
{
	dma_case(KNEM_FLAG_DMA | KNEM_FLAG_ASYNCDMACOMPLETE, 1, NULL);
}
static void test_dma_thread(void)
{
	dma_case(KNEM_FLAG_DMA | KNEM_FLAG_DMATHREAD, 1, NULL);
}
static void test_dma_failed(void)
{
	dma_case(KNEM_FLAG_DMA, 0, "1");
}
static void test_dma_async_failed(void)
{
	dma_case(KNEM_FLAG_DMA | KNEM_FLAG_ASYNCDMACOMPLETE, 1, "1");
}
/*
 * One descriptor in ten fails somewhere inside a 64-descriptor copy: the
 * chained SUCCESS must never reach the slot, which ends FAILED.
 */
static void test_dma_async_partial_failure(void)
{
	size_t n = 128 * 4096;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	volatile knem_status_t *slots;
	knem_cookie_t c;
	uint32_t st;
	int fd = dev_open(), i, seen_success = 0;

	if (!have_dma()) {
		skip_reason = "no DMA_MEMCPY channel (softdma not loaded)";
		return;
	}
	slots = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(slots != MAP_FAILED, "mmap");
	pattern(src, n, 44);
	CHECK_OK(strided_region(fd, src, 64, &c));
	set_param("softdma", "fail_every", "10");
	CHECK_OK(inline_copy(fd, dst, n / 2, 0, c, 0,
			     KNEM_FLAG_DMA | KNEM_FLAG_ASYNCDMACOMPLETE, 5, &st));
	CHECK(st == KNEM_STATUS_PENDING, "current_status %u", st);
	for (i = 0; i < 20000 && slots[5] != KNEM_STATUS_FAILED; i++) {
		seen_success |= slots[5] == KNEM_STATUS_SUCCESS;
		usleep(200);
	}
	set_param("softdma", "fail_every", "0");
	CHECK(!seen_success && slots[5] == KNEM_STATUS_FAILED,
	      "slot %u, SUCCESS seen %d", slots[5], seen_success);
	munmap((void *)slots, 4096);
	close(fd);
	munmap(src, n);
	munmap(dst, n);
}
static void test_dma_thread_failed(void)
{
	dma_case(KNEM_FLAG_DMA | KNEM_FLAG_DMATHREAD, 1, "1");
}

static void test_dma_fallback(void)
{
	long before = stat_value("dma fallbacks to cpu");
	size_t n = 64 * 4096;
	unsigned char *src = buf_alloc(n), *dst = buf_alloc(n);
	knem_cookie_t c;
	uint32_t st;
	int fd = dev_open();

	if (!have_dma()) {
		skip_reason = "no DMA_MEMCPY channel (softdma not loaded)";
		return;
	}
	pattern(src, n, 66);
	set_param("softdma", "max_queued", "3");
	/* 32 discontiguous pages: the 4th descriptor is refused. */
	CHECK_OK(strided_region(fd, src, 32, &c));
	CHECK_OK(inline_copy(fd, dst, n / 2, 0, c, 0, KNEM_FLAG_DMA, 0, &st));
	set_param("softdma", "max_queued", "1048576");
	CHECK(st == KNEM_STATUS_SUCCESS, "status %u", st);
	CHECK(strided_same(dst, src, 32), "fallback data");
	CHECK(stat_value("dma fallbacks to cpu") == before + 1, "fallbacks");
	close(fd);
	munmap(src, n);
	munmap(dst, n);
}

/*
 * max_user_regions bounds the live regions of one euid over all its files
 * (ENOSPC), not those of one file.
 */
static void test_user_region_limit(void)
{
	unsigned char *p = buf_alloc(4096);
	knem_cookie_t c[4];
	long base = stat_value("regions created") - stat_value("regions destroyed");
	int fd = dev_open(), fd2 = dev_open(), i;
	char limit[32];

	snprintf(limit, sizeof(limit), "%ld", base + 3);
	set_param("knem", "max_user_regions", limit);
	for (i = 0; i < 2; i++)
		CHECK_OK(region(fd, p, 4096, PROT_READ, 0, &c[i]));
	CHECK_OK(region(fd2, p, 4096, PROT_READ, 0, &c[2]));
	CHECK_ERR(region(fd, p, 4096, PROT_READ, 0, &c[3]), ENOSPC);
	CHECK_ERR(region(fd2, p, 4096, PROT_READ, 0, &c[3]), ENOSPC);
	CHECK_OK(destroy(fd, c[0]));
	CHECK_OK(region(fd2, p, 4096, PROT_READ, 0, &c[3]));
	set_param("knem", "max_user_regions", "1048576");
	close(fd);
	close(fd2);
	munmap(p, 4096);
}

static void test_stats_readonly(void)
{
	char text[4096];
	int fd = open(KNEM_DEVICE_FILENAME, O_RDONLY);
	ssize_t n;

	CHECK(fd >= 0, "open");
	n = read(fd, text, sizeof(text) - 1);
	CHECK(n > 0, "read %zd", n);
	text[n] = 0;
	CHECK(strstr(text, "knem ABI 0xd"), "stats text: %s", text);
	close(fd);
}

static void test_tracepoint(void)
{
	const char *dir = "/sys/kernel/tracing";
	char path[256], text[65536];
	unsigned char *p = buf_alloc(8192), *q = buf_alloc(8192);
	knem_cookie_t c;
	uint32_t st;
	int fd, kfd = dev_open();
	ssize_t n;

	mount("tracefs", dir, "tracefs", 0, NULL);
	snprintf(path, sizeof(path), "%s/events/knem/knem_copy/format", dir);
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		skip_reason = "tracefs not available";
		return;
	}
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = 0;
	CHECK(strstr(text, "field:__u64 length;") &&
	      strstr(text, "field:__u32 engine;") &&
	      strstr(text, "field:__s32 pid;"), "format: %s", text);
	snprintf(path, sizeof(path), "%s/events/knem/knem_copy/enable", dir);
	fd = open(path, O_WRONLY);
	CHECK(fd >= 0 && write(fd, "1", 1) == 1, "enable");
	close(fd);
	snprintf(path, sizeof(path), "%s/trace", dir);
	fd = open(path, O_WRONLY | O_TRUNC);
	close(fd);
	CHECK_OK(region(kfd, p, 8192, PROT_READ, 0, &c));
	CHECK_OK(inline_copy(kfd, q, 5000, 0, c, 0, 0, 0, &st));
	fd = open(path, O_RDONLY);
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = 0;
	snprintf(path, sizeof(path), "length=5000 engine=0 pid=%d", getpid());
	CHECK(strstr(text, path), "trace lacks \"%s\": %s", path, text);
	snprintf(path, sizeof(path), "%s/events/knem/knem_copy/enable", dir);
	fd = open(path, O_WRONLY);
	if (fd >= 0 && write(fd, "0", 1) != 1)
		perror("disable");
	close(fd);
	close(kfd);
}

static const struct tcase cases[] = {
	{ "TestInfo", test_info },
	{ "TestInlineReadWrite", test_inline_read_write },
	{ "TestBoundedIovecs", test_bounded_and_iovecs },
	{ "TestRegionCopy", test_region_copy },
	{ "TestErrors", test_errors },
	{ "TestSingleUseAndClose", test_singleuse_and_close },
	{ "TestOtherProcess", test_other_process },
	{ "TestAsyncThreadNotify", test_async_thread_notify },
	{ "TestOldAPI", test_old_api },
	{ "TestDMASync", test_dma_sync },
	{ "TestDMAAsyncChained", test_dma_async_chained },
	{ "TestDMAThread", test_dma_thread },
	{ "TestDMAFailed", test_dma_failed },
	{ "TestDMAAsyncFailed", test_dma_async_failed },
	{ "TestDMAAsyncPartialFailure", test_dma_async_partial_failure },
	{ "TestDMAThreadFailed", test_dma_thread_failed },
	{ "TestDMAFallback", test_dma_fallback },
	{ "TestUserRegionLimit", test_user_region_limit },
	{ "TestStatsReadOnly", test_stats_readonly },
	{ "TestTracepoint", test_tracepoint },
};

int main(void)
{
	return ktest_main(cases, sizeof(cases) / sizeof(cases[0]));
}
