/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ktest.h - the helpers of the static guest test programs: go test -v
 * style cases ("--- PASS: name"), exact-errno checks, data patterns, the
 * driver's statistics and module parameters.  Each program includes it
 * once and calls ktest_main() with its table of cases; after every case
 * the pinned page count of the statistics must be back to where it was.
 */
#ifndef KTEST_H
#define KTEST_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../uapi/knem_io.h"

static int failures;
static int case_failed;
static const char *case_name __attribute__((unused));

#define CHECK(cond, ...) do {						\
	if (!(cond)) {							\
		printf("    %s:%d: ", __FILE__, __LINE__);		\
		printf(__VA_ARGS__);					\
		printf("\n");						\
		case_failed = 1;					\
		return;							\
	}								\
} while (0)

#define CHECK_OK(expr) do {						\
	int rc_ = (expr);						\
	CHECK(rc_ == 0, "%s = %d, errno %d (%s)", #expr, rc_, errno,	\
	      strerror(errno));						\
} while (0)

#define CHECK_ERR(expr, err) do {					\
	int rc_ = (expr);						\
	CHECK(rc_ == -1 && errno == (err), "%s = %d errno %d (%s), want %s", \
	      #expr, rc_, rc_ ? errno : 0, strerror(errno), #err);	\
} while (0)

static const char *skip_reason;

static __attribute__((unused)) int dev_open(void)
{
	return open(KNEM_DEVICE_FILENAME, O_RDWR);
}

static __attribute__((unused)) void pattern(unsigned char *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 31 + seed + (i >> 12));
}

static __attribute__((unused)) int same_pattern(const unsigned char *p, size_t n, size_t off,
			unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (unsigned char)((i + off) * 31 + seed + ((i + off) >> 12)))
			return 0;
	return 1;
}

static void *buf_alloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	memset(p, 0, n);
	return p;
}

static __attribute__((unused)) long stat_value(const char *name)
{
	char text[4096], *line;
	int fd = open(KNEM_DEVICE_FILENAME, O_RDONLY);
	ssize_t n;
	long v = -1;

	if (fd < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = 0;
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		size_t l = strlen(name);

		if (!strncmp(line, name, l) && line[l] == ':')
			v = atol(line + l + 1);
	}
	return v;
}

static __attribute__((unused)) int region(int fd, void *p, size_t n, unsigned int prot,
		  unsigned int flags, knem_cookie_t *cookie)
{
	struct knem_cmd_param_iovec iov = { (uintptr_t)p, n };
	struct knem_cmd_create_region cr = {
		.iovec_array = (uintptr_t)&iov, .iovec_nr = 1,
		.flags = flags, .protection = prot,
	};
	int rc = ioctl(fd, KNEM_CMD_CREATE_REGION, &cr);

	*cookie = cr.cookie;
	return rc;
}

/*
 * A region of @n pages taken from every other page of @p (2 * n pages):
 * physically discontiguous by construction, so a DMA copy of it needs at
 * least @n descriptors.
 */
static __attribute__((unused)) int strided_region(int fd, unsigned char *p, int n,
			  knem_cookie_t *cookie)
{
	struct knem_cmd_param_iovec iov[64];
	struct knem_cmd_create_region cr = {
		.iovec_array = (uintptr_t)iov, .iovec_nr = n,
		.protection = PROT_READ,
	};
	int i, rc;

	for (i = 0; i < n; i++) {
		iov[i].base = (uintptr_t)p + 2 * i * 4096;
		iov[i].len = 4096;
	}
	rc = ioctl(fd, KNEM_CMD_CREATE_REGION, &cr);
	*cookie = cr.cookie;
	return rc;
}

static __attribute__((unused)) int strided_same(const unsigned char *dst, const unsigned char *src,
			int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (memcmp(dst + i * 4096, src + 2 * i * 4096, 4096))
			return 0;
	return 1;
}

static __attribute__((unused)) int inline_copy(int fd, void *p, size_t n, int write, knem_cookie_t c,
		       uint64_t off, uint32_t flags, uint32_t idx,
		       uint32_t *status)
{
	struct knem_cmd_param_iovec iov = { (uintptr_t)p, n };
	struct knem_cmd_inline_copy ic = {
		.local_iovec_array = (uintptr_t)&iov, .local_iovec_nr = 1,
		.write = write, .remote_cookie = c, .remote_offset = off,
		.flags = flags, .async_status_index = idx,
		.current_status = 0xdead,
	};
	int rc = ioctl(fd, KNEM_CMD_INLINE_COPY, &ic);

	*status = ic.current_status;
	return rc;
}

static __attribute__((unused)) int destroy(int fd, knem_cookie_t c)
{
	return ioctl(fd, KNEM_CMD_DESTROY_REGION, &c);
}

static __attribute__((unused)) int wait_slot(volatile knem_status_t *slot)
{
	int i;

	for (i = 0; i < 20000 && *slot == KNEM_STATUS_PENDING; i++)
		usleep(500);
	return *slot;
}

static __attribute__((unused)) int have_dma(void)
{
	struct knem_cmd_info info;
	int fd = dev_open();

	ioctl(fd, KNEM_CMD_GET_INFO, &info);
	close(fd);
	return info.features & KNEM_FEATURE_DMA;
}

static __attribute__((unused)) void set_param(const char *mod, const char *param, const char *val)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/sys/module/%s/parameters/%s", mod, param);
	fd = open(path, O_WRONLY);
	if (fd >= 0) {
		if (write(fd, val, strlen(val)) < 0)
			perror(path);
		close(fd);
	}
}

#define TRACEFS "/sys/kernel/tracing"

/* Switch the knem:knem_copy event on (emptying the buffer) or off. */
static __attribute__((unused)) int trace_knem(int on)
{
	int fd, ok;

	mount("tracefs", TRACEFS, "tracefs", 0, NULL);
	fd = open(TRACEFS "/events/knem/knem_copy/enable", O_WRONLY);
	if (fd < 0)
		return -1;
	ok = write(fd, on ? "1" : "0", 1) == 1;
	close(fd);
	if (on)
		close(open(TRACEFS "/trace", O_WRONLY | O_TRUNC));
	return ok ? 0 : -1;
}

/*
 * The CPU of the last traced knem_copy event of @engine for this process
 * (the "[001]" column of the trace), or -1 when there is none.
 */
static int traced_cpu_now(int engine)
{
	static char text[1 << 16];
	char want[64], *line, *hit;
	int fd = open(TRACEFS "/trace", O_RDONLY), cpu = -1;
	ssize_t n, len = 0;

	if (fd < 0)
		return -1;
	while (len < (ssize_t)sizeof(text) - 1 &&
	       (n = read(fd, text + len, sizeof(text) - 1 - len)) > 0)
		len += n;
	close(fd);
	text[len] = 0;
	snprintf(want, sizeof(want), "engine=%d pid=%d", engine, getpid());
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		hit = strstr(line, want);
		if (hit && strchr(line, '['))
			cpu = atoi(strchr(line, '[') + 1);
	}
	return cpu;
}

/*
 * traced_cpu_now(), waiting up to 5 s for the event: the module fires it
 * after it marks the status slot, so a waiter on the slot can look before
 * it is there.  Empty the trace (trace_knem(1)) before each copy.
 */
static __attribute__((unused)) int traced_cpu(int engine)
{
	int i, cpu = -1;

	for (i = 0; i < 5000 && cpu < 0; i++) {
		cpu = traced_cpu_now(engine);
		if (cpu < 0)
			usleep(1000);
	}
	return cpu;
}

struct tcase {
	const char *name;
	void (*fn)(void);
};

/*
 * The kernel log from now on: /dev/kmsg read from its end, so that a case
 * sees only the records written while it ran.  -1 without /dev/kmsg.
 */
static int kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/*
 * The first record since kmsg_open() that reports a kernel bug (what
 * ci/test-kernel.sh fails a whole guest for), or NULL.
 */
static const char *kmsg_trouble(int fd)
{
	static const char *const bad[] = {
		"BUG", "WARNING", "Oops", "Call Trace", "leak", "refcount",
		"general protection", "UBSAN", "blocked for more than",
	};
	static char rec[8192];
	ssize_t n;
	size_t i;

	if (fd < 0)
		return NULL;
	for (;;) {
		n = read(fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)	/* overwritten: read on */
			continue;
		if (n <= 0)
			return NULL;
		rec[n] = 0;
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			if (strstr(rec, bad[i]))
				return rec;
	}
}

static __attribute__((unused)) void run(const struct tcase *t)
{
	long pinned_before = stat_value("pinned pages"), pinned_after = -2;
	int i, kmsg = kmsg_open();
	const char *trouble;

	case_name = t->name;
	case_failed = 0;
	skip_reason = NULL;
	printf("=== RUN   %s\n", t->name);
	fflush(stdout);
	t->fn();
	/* asynchronous completions of closed files may lag a little */
	for (i = 0; i < 200 && !case_failed; i++) {
		pinned_after = stat_value("pinned pages");
		if (pinned_after == pinned_before)
			break;
		usleep(10000);
	}
	if (!case_failed && pinned_after != pinned_before) {
		printf("    pinned pages %ld before, %ld after\n",
		       pinned_before, pinned_after);
		case_failed = 1;
	}
	trouble = kmsg_trouble(kmsg);
	if (trouble) {
		printf("    kernel log: %s", trouble);
		case_failed = 1;
	}
	if (kmsg >= 0)
		close(kmsg);
	if (case_failed) {
		printf("--- FAIL: %s\n", t->name);
		failures++;
	} else if (skip_reason) {
		printf("--- SKIP: %s (%s)\n", t->name, skip_reason);
	} else {
		printf("--- PASS: %s\n", t->name);
	}
	fflush(stdout);
}

static __attribute__((unused)) int ktest_main(const struct tcase *cases, size_t n)
{
	size_t i;

	signal(SIGPIPE, SIG_IGN);
	if (access(KNEM_DEVICE_FILENAME, F_OK)) {
		printf("--- FAIL: TestDevice (%s missing)\nFAIL\n",
		       KNEM_DEVICE_FILENAME);
		return 1;
	}
	for (i = 0; i < n; i++)
		run(&cases[i]);
	printf(failures ? "FAIL\n" : "PASS\n");
	return failures ? 1 : 0;
}

#endif /* KTEST_H */
