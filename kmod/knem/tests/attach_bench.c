// SPDX-License-Identifier: GPL-2.0
/*
 * attach_bench - reading another process's buffer, 4 KiB to 1 MiB per
 * message: memcpy from a region attached once (KNEM_FEATURE_ATTACH, the
 * attachment kept across messages as a registration cache would) against
 * one INLINE_COPY per message (plain, and PINLOCAL).  Same run, same CPU:
 * only the ratios mean anything, in QEMU/TCG especially.
 *
 * The attached copy is timed twice: with glibc's memcpy, and with a plain
 * 8-byte loop.  Under TCG, glibc's choice of "rep movsb" for mid sizes
 * (about 16 KiB to a few hundred KiB) is emulated a byte at a time and
 * would measure the emulator, not the mapping; hardware has no such gap.
 *
 *   attach_bench [min_seconds_per_point=0.3]
 */
#define _GNU_SOURCE
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

#define MAXSZ (1UL << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct shared {
	knem_cookie_t cookie;
	int ready;
};

/* A copy the compiler may not turn back into a memcpy call. */
__attribute__((optimize("no-tree-loop-distribute-patterns")))
static void copy_words(unsigned char *dst, const unsigned char *src, size_t n)
{
	uint64_t *d = (uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;
	size_t i;

	for (i = 0; i < n / 8; i++)
		d[i] = s[i];
	for (i = n & ~7UL; i < n; i++)
		dst[i] = src[i];
}

/* One message of @sz bytes by method @m into @dst; 0 on success. */
static int one(int m, int fd, knem_cookie_t c, const unsigned char *map,
	       unsigned char *dst, size_t sz)
{
	struct knem_cmd_param_iovec kiov = { (uintptr_t)dst, sz };
	struct knem_cmd_inline_copy_bounded ic = {
		.local_iovec_array = (uintptr_t)&kiov, .local_iovec_nr = 1,
		.remote_cookie = c, .length = sz,
		.flags = m == 3 ? KNEM_FLAG_PINLOCAL : 0,
	};

	if (m == 0) {
		memcpy(dst, map, sz);
		return 0;
	}
	if (m == 1) {
		copy_words(dst, map, sz);
		return 0;
	}
	return ioctl(fd, KNEM_CMD_INLINE_COPY_BOUNDED, &ic) ||
	       ic.current_status != KNEM_STATUS_SUCCESS;
}

int main(int argc, char **argv)
{
	double minsec = argc > 1 && argv[1][0] != '-' ? atof(argv[1]) : 0.3;
	struct shared *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned char *dst = mmap(NULL, MAXSZ, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = open(KNEM_DEVICE_FILENAME, O_RDWR), pipefd[2];
	struct knem_cmd_attach_region ar = { .protection = PROT_READ };
	struct knem_cmd_info info;
	unsigned char *map;
	pid_t child;
	size_t sz;

	if (fd < 0 || pipe(pipefd) || ioctl(fd, KNEM_CMD_GET_INFO, &info)) {
		perror("/dev/knem");
		return 1;
	}
	if (!(info.features & KNEM_FEATURE_ATTACH)) {
		fprintf(stderr, "no KNEM_FEATURE_ATTACH\n");
		return 1;
	}
	memset(dst, 0, MAXSZ);
	child = fork();
	if (child == 0) {
		unsigned char *src = mmap(NULL, MAXSZ, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct knem_cmd_param_iovec iov = { (uintptr_t)src, MAXSZ };
		struct knem_cmd_create_region cr = {
			.iovec_array = (uintptr_t)&iov, .iovec_nr = 1,
			.protection = PROT_READ,
		};
		int cfd = open(KNEM_DEVICE_FILENAME, O_RDWR);
		char c;

		memset(src, 0x5a, MAXSZ);
		if (ioctl(cfd, KNEM_CMD_CREATE_REGION, &cr))
			_exit(1);
		sh->cookie = cr.cookie;
		__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
		close(pipefd[1]);
		if (read(pipefd[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE))
		usleep(1000);
	ar.cookie = sh->cookie;
	if (ioctl(fd, KNEM_CMD_ATTACH_REGION, &ar)) {
		perror("ATTACH_REGION");
		return 1;
	}
	map = mmap(NULL, ar.map_length, PROT_READ, MAP_SHARED, fd, ar.offset);
	if (map == MAP_FAILED) {
		perror("mmap attachment");
		return 1;
	}
	map += ar.data_offset;

	printf("%-9s %12s %12s %12s %12s %10s %10s %10s\n", "size",
	       "att-memcpy", "att-loop", "inline", "pinlocal", "memcpy/inl",
	       "loop/inl", "loop/pinl");
	for (sz = 4 << 10; sz <= MAXSZ; sz <<= 2) {
		double rate[4] = { 0 };
		int m;

		for (m = 0; m < 4; m++) {
			double t0 = now(), t;
			long iters = 0;

			do {
				if (one(m, fd, sh->cookie, map, dst, sz))
					return perror("inline copy"), 1;
				iters++;
				t = now() - t0;
			} while (t < minsec);
			rate[m] = iters * (double)sz / t / 1e9;
			if (dst[0] != 0x5a || dst[sz - 1] != 0x5a)
				return fprintf(stderr, "bad data\n"), 1;
			memset(dst, 0, sz);
		}
		printf("%-6zuKiB %9.3fGB/s %9.3fGB/s %9.3fGB/s %9.3fGB/s %10.2f %10.2f %10.2f\n",
		       sz >> 10, rate[0], rate[1], rate[2], rate[3],
		       rate[0] / rate[2], rate[1] / rate[2], rate[1] / rate[3]);
	}
	close(pipefd[1]);
	waitpid(child, NULL, 0);
	return 0;
}
