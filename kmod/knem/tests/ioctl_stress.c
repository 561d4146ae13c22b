// SPDX-License-Identifier: GPL-2.0
/*
 * ioctl_stress - random /dev/knem commands for a bounded time, from several
 * processes (one of them under another uid) that trade cookies through
 * shared memory, with random flags, lengths, offsets, bad addresses, files
 * closed with copies in flight and buffers unmapped under live regions,
 * NOTIFY_FD copies and reads of their queue of every size, region
 * attachments mapped, touched, split, detached and left to process exit,
 * regions watched for invalidation (good and bad slots) under pages zapped
 * with MADV_DONTNEED, and a root worker that drops to another uid in the middle of its run.
 *
 *   ioctl_stress [seconds=10] [seed=1]
 *
 * The kernel must survive without an oops or warning (the harness checks
 * the log); at the end every process has closed its files and the
 * statistics must show 0 pages pinned.  Prints "--- PASS: TestIoctlStress"
 * or "--- FAIL: ..." like go test.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../uapi/knem_io.h"

#define NPROC 4
#define NCOOKIES 64
#define BUFSZ (256 * 1024)

static volatile knem_cookie_t *shared_cookies;
static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t pick(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static uint32_t rnd_flags(void)
{
	uint32_t f = rnd() & 0xff;

	if (!pick(50))
		f |= 1U << (8 + pick(24));	/* invalid bit */
	return f;
}

static uint64_t rnd_addr(unsigned char *buf)
{
	switch (pick(12)) {
	case 0: return 0;
	case 1: return 0x1000;
	case 2: return (uint64_t)-4096;
	case 3: return 0x7fffffffe000ULL;
	default: return (uintptr_t)buf + pick(BUFSZ);
	}
}

static uint64_t rnd_len(void)
{
	switch (pick(10)) {
	case 0: return 0;
	case 1: return (uint64_t)-1;
	case 2: return 1ULL << 40;
	case 3: return pick(16);
	default: return pick(BUFSZ / 2);
	}
}

static knem_cookie_t rnd_cookie(knem_cookie_t *mine, int nmine)
{
	switch (pick(8)) {
	case 0: return 0;
	case 1: return rnd();
	case 2:
	case 3:
	case 4: return shared_cookies[pick(NCOOKIES)];
	default: return nmine ? mine[pick(nmine)] : rnd();
	}
}

static void fill_iovecs(struct knem_cmd_param_iovec *iov, uint32_t *nr,
			unsigned char *buf)
{
	uint32_t i, n = 1 + pick(4);

	if (!pick(30))
		n = 2000;	/* over max_iovecs */
	for (i = 0; i < n && i < 8; i++) {
		iov[i].base = rnd_addr(buf);
		iov[i].len = pick(4) ? pick(BUFSZ / 8) : rnd_len();
	}
	*nr = n;
}

/* Attach a cookie, map some of it, read it, maybe unmap part or detach. */
static void attach_op(int fd, knem_cookie_t *mine, int nmine)
{
	struct knem_cmd_attach_region at = {
		.cookie = rnd_cookie(mine, nmine),
		.protection = pick(10) ? 1 + pick(3) : rnd() & 0xf,
		.flags = pick(20) ? 0 : rnd(),
	};
	uint64_t len, off;
	volatile unsigned char *p;

	if (ioctl(fd, KNEM_CMD_ATTACH_REGION, &at)) {
		if (!pick(4)) {
			off = pick(4) ? rnd() << 32 : rnd();
			ioctl(fd, KNEM_CMD_DETACH_REGION, &off);
		}
		return;
	}
	len = pick(5) ? at.map_length : 4096 * (1 + pick(8));
	off = at.offset + (pick(5) ? 0 : 4096 * pick(4));
	p = mmap(NULL, len, pick(4) ? PROT_READ : PROT_READ | PROT_WRITE,
		 pick(10) ? MAP_SHARED : MAP_PRIVATE, fd, off);
	if (p != MAP_FAILED) {
		(void)p[pick(len)];
		if (pick(2))
			munmap((void *)p, pick(2) ? len : 4096);
	}
	if (pick(2))
		ioctl(fd, KNEM_CMD_DETACH_REGION, &at.offset);
}

static void one_op(int *fd, unsigned char **buf, knem_cookie_t *mine,
		   int *nmine, void **slots)
{
	struct knem_cmd_param_iovec iov[8];
	union {
		struct knem_cmd_create_region cr;
		struct knem_cmd_copy_bounded cpb;
		struct knem_cmd_inline_copy_bounded icb;
		struct knem_cmd_info info;
		struct knem_cmd_bind_offload bind;
		struct knem_cmd_init_send_param is;
		struct knem_cmd_sync_recv_param sr;
		struct knem_cmd_init_async_recv_param ar;
		struct knem_cmd_attach_region at;
		knem_cookie_t cookie;
	} u;
	uint64_t mask = rnd();

	memset(&u, 0, sizeof(u));
	memset(iov, 0, sizeof(iov));
	switch (pick(18)) {
	case 0:
	case 1:
	case 2:
		fill_iovecs(iov, &u.cr.iovec_nr, *buf);
		u.cr.iovec_array = pick(20) ? (uintptr_t)iov : rnd_addr(*buf);
		u.cr.flags = rnd_flags() & (pick(4) ? 0xa0 : 0xffffffff);
		u.cr.protection = pick(10) ? 1 + pick(3) : rnd() & 0xf;
		if (!pick(3)) {
			u.cr.flags |= KNEM_FLAG_INVALIDATE_STATUS;
			u.cr.invalidate_status = pick(8192);
		}
		if (!pick(4))
			madvise(*buf + 4096 * pick(BUFSZ / 4096), 4096,
				MADV_DONTNEED);
		if (!ioctl(*fd, KNEM_CMD_CREATE_REGION, &u.cr)) {
			if (*nmine < NCOOKIES)
				mine[(*nmine)++] = u.cr.cookie;
			shared_cookies[pick(NCOOKIES)] = u.cr.cookie;
		}
		break;
	case 3:
		u.cookie = rnd_cookie(mine, *nmine);
		ioctl(*fd, KNEM_CMD_DESTROY_REGION, &u.cookie);
		break;
	case 4:
	case 5:
	case 6:
	case 7:
		fill_iovecs(iov, &u.icb.local_iovec_nr, *buf);
		u.icb.local_iovec_array = (uintptr_t)iov;
		u.icb.write = pick(10) ? pick(2) : rnd() & 7;
		u.icb.remote_cookie = rnd_cookie(mine, *nmine);
		u.icb.remote_offset = pick(3) ? pick(BUFSZ) : rnd_len();
		u.icb.length = rnd_len();
		u.icb.flags = rnd_flags();
		u.icb.async_status_index = pick(5000);
		ioctl(*fd, pick(2) ? KNEM_CMD_INLINE_COPY_BOUNDED :
		      KNEM_CMD_INLINE_COPY, &u.icb);
		break;
	case 8:
	case 9:
		u.cpb.src_cookie = rnd_cookie(mine, *nmine);
		u.cpb.dst_cookie = rnd_cookie(mine, *nmine);
		u.cpb.src_offset = pick(BUFSZ);
		u.cpb.dst_offset = pick(3) ? pick(BUFSZ) : rnd_len();
		u.cpb.length = rnd_len();
		u.cpb.flags = rnd_flags();
		u.cpb.async_status_index = pick(5000);
		ioctl(*fd, pick(2) ? KNEM_CMD_COPY_BOUNDED : KNEM_CMD_COPY,
		      &u.cpb);
		break;
	case 10:
		if (!*slots || !pick(4)) {
			void *s = mmap(NULL, 8192,
				       PROT_READ | PROT_WRITE, MAP_SHARED, *fd,
				       pick(10) ? 0 : 4096);
			if (s != MAP_FAILED)
				*slots = s;
		}
		break;
	case 11:
		u.bind.flags = 1U << pick(4);
		u.bind.mask_len = pick(5) ? 8 : pick(9000);
		u.bind.mask_ptr = pick(5) ? (uintptr_t)&mask : rnd_addr(*buf);
		ioctl(*fd, KNEM_CMD_BIND_OFFLOAD, &u.bind);
		break;
	case 12:
		fill_iovecs(iov, &u.is.send_iovec_nr, *buf);
		u.is.send_iovec_array = (uintptr_t)iov;
		u.is.flags = rnd_flags();
		if (!ioctl(*fd, KNEM_CMD_INIT_SEND, &u.is))
			shared_cookies[pick(NCOOKIES)] = u.is.send_cookie;
		break;
	case 13:
		fill_iovecs(iov, &u.ar.recv_iovec_nr, *buf);
		u.ar.recv_iovec_array = (uintptr_t)iov;
		u.ar.send_cookie = rnd_cookie(mine, *nmine);
		u.ar.flags = rnd_flags();
		u.ar.status_index = pick(5000);
		ioctl(*fd, pick(2) ? KNEM_CMD_SYNC_RECV :
		      KNEM_CMD_INIT_ASYNC_RECV, &u.ar);
		break;
	case 14:
		if (pick(2)) {
			ioctl(*fd, pick(2) ? KNEM_CMD_GET_INFO :
			      _IOWR('K', pick(256), struct knem_cmd_info),
			      &u.info);
		} else {
			/* NOTIFY_FD queue: any size, never blocking here */
			uint32_t idx[64];

			read(*fd, idx, pick(4) ? 4 * (1 + pick(64)) : pick(300));
		}
		break;
	case 15:
		if (!pick(8)) {
			/* close with copies possibly in flight */
			if (*slots)
				munmap(*slots, 8192);
			*slots = NULL;
			close(*fd);
			*fd = open(KNEM_DEVICE_FILENAME, O_RDWR | O_NONBLOCK);
			*nmine = 0;
		} else if (!pick(4)) {
			/* regions outlive the mapping they pinned */
			munmap(*buf, BUFSZ);
			*buf = mmap(NULL, BUFSZ, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			memset(*buf, 1, BUFSZ);
		}
		break;
	case 16:
	case 17:
		attach_op(*fd, mine, *nmine);
		break;
	}
}

static void worker(int id, int seconds)
{
	unsigned char *buf = mmap(NULL, BUFSZ, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	knem_cookie_t mine[NCOOKIES];
	int fd, nmine = 0, dropped = 0;
	time_t end = time(NULL) + seconds;
	void *slots = NULL;
	unsigned long ops = 0;

	rng = 0x9e3779b97f4a7c15ULL * (id + 1) + (uint64_t)rng;
	if (id == NPROC - 1 && setuid(65534))
		_exit(3);
	memset(buf, 1, BUFSZ);
	fd = open(KNEM_DEVICE_FILENAME, O_RDWR);
	if (fd < 0)
		_exit(2);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while (time(NULL) < end) {
		one_op(&fd, &buf, mine, &nmine, &slots);
		ops++;
		/* Root worker 0 drops privileges half way, descriptor open. */
		if (id == 0 && !dropped && time(NULL) >= end - seconds / 2) {
			if (setuid(65534))
				_exit(4);
			dropped = 1;
		}
	}
	printf("    worker %d: %lu operations\n", id, ops);
	_exit(0);
}

static long pinned_now(void)
{
	char text[4096], *p;
	int fd = open(KNEM_DEVICE_FILENAME, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	text[n] = 0;
	p = strstr(text, "\npinned pages:");
	return p ? atol(p + 14) : -1;
}

int main(int argc, char **argv)
{
	int seconds = argc > 1 ? atoi(argv[1]) : 10;
	int i, status, bad = 0;
	long pinned = -1;

	if (argc > 1 && argv[1][0] == '-')
		seconds = 10;	/* go test flags from the harness */
	rng = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
	shared_cookies = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	printf("=== RUN   TestIoctlStress\n");
	fflush(stdout);
	for (i = 0; i < NPROC; i++)
		if (fork() == 0)
			worker(i, seconds);
	for (i = 0; i < NPROC; i++) {
		wait(&status);
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			printf("    a worker died: status %#x\n", status);
			bad = 1;
		}
	}
	for (i = 0; i < 500; i++) {
		pinned = pinned_now();
		if (!pinned)
			break;
		usleep(10000);
	}
	if (pinned) {
		printf("    %ld pages still pinned after every file closed\n",
		       pinned);
		bad = 1;
	}
	printf("--- %s: TestIoctlStress\n", bad ? "FAIL" : "PASS");
	printf(bad ? "FAIL\n" : "PASS\n");
	return bad;
}
