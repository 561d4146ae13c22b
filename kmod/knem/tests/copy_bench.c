// SPDX-License-Identifier: GPL-2.0
/*
 * copy_bench - throughput of a single-copy read of another process's
 * buffer: KNEM INLINE_COPY (sync CPU, and optionally DMA) against
 * process_vm_readv, 64 KiB to 16 MiB.  Both run on the same CPU in the
 * same run, so only their ratio means anything (in QEMU/TCG especially).
 *
 *   copy_bench [min_seconds_per_point=0.3]
 *
 * "knem" copies from a persistent region into an unpinned local buffer
 * (copy_to_user); "pinlocal" is the same with KNEM_FLAG_PINLOCAL (local
 * pages pinned per copy, then kmap + memcpy); "knem+reg" pins the local
 * buffer as a SINGLEUSE region per message and COPYs region to region;
 * "knem-dma" is KNEM_FLAG_DMA (through softdma in a guest).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../uapi/knem_io.h"

#define MAXSZ (16UL << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct shared {
	uint64_t src;
	knem_cookie_t cookie;
	int ready;
};

int main(int argc, char **argv)
{
	double minsec = argc > 1 ? atof(argv[1]) : 0.3;
	struct shared *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned char *dst = mmap(NULL, MAXSZ, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = open(KNEM_DEVICE_FILENAME, O_RDWR), pipefd[2];
	struct knem_cmd_info info;
	pid_t child;
	size_t sz;

	if (fd < 0 || pipe(pipefd)) {
		perror("open /dev/knem");
		return 1;
	}
	ioctl(fd, KNEM_CMD_GET_INFO, &info);
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
		sh->src = (uintptr_t)src;
		sh->cookie = cr.cookie;
		__atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
		close(pipefd[1]);
		if (read(pipefd[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE))
		usleep(1000);

	printf("%-9s %12s %12s %12s %12s %12s %8s\n", "size", "pvm_readv",
	       "knem", "knem+reg", "knem-dma", "pinlocal", "knem/pvm");
	for (sz = 64 << 10; sz <= MAXSZ; sz <<= 2) {
		double rate[5] = { 0 };
		int m;

		for (m = 0; m < 5; m++) {
			double t0 = now(), t;
			long iters = 0;

			if (m == 3 && !(info.features & KNEM_FEATURE_DMA))
				continue;
			do {
				struct iovec l = { dst, sz };
				struct iovec r = { (void *)(uintptr_t)sh->src, sz };
				struct knem_cmd_param_iovec kiov = {
					(uintptr_t)dst, sz };
				struct knem_cmd_inline_copy_bounded ic = {
					.local_iovec_array = (uintptr_t)&kiov,
					.local_iovec_nr = 1,
					.remote_cookie = sh->cookie,
					.length = sz,
					.flags = m == 3 ? KNEM_FLAG_DMA :
						 m == 4 ? KNEM_FLAG_PINLOCAL : 0,
				};

				if (m == 0 &&
				    process_vm_readv(child, &l, 1, &r, 1, 0) != (ssize_t)sz)
					return perror("process_vm_readv"), 1;
				if (m == 2) {
					/* a fresh single-use region per message,
					 * from our side: same pinning cost */
					struct knem_cmd_create_region cr = {
						.iovec_array = (uintptr_t)&kiov,
						.iovec_nr = 1,
						.protection = PROT_READ | PROT_WRITE,
						.flags = KNEM_FLAG_SINGLEUSE,
					};
					if (ioctl(fd, KNEM_CMD_CREATE_REGION, &cr))
						return perror("create"), 1;
					{
						struct knem_cmd_copy_bounded cp = {
							.src_cookie = sh->cookie,
							.dst_cookie = cr.cookie,
							.length = sz,
						};
						if (ioctl(fd, KNEM_CMD_COPY_BOUNDED, &cp))
							return perror("copy"), 1;
					}
				}
				if ((m == 1 || m >= 3) &&
				    (ioctl(fd, KNEM_CMD_INLINE_COPY_BOUNDED, &ic) ||
				     ic.current_status != KNEM_STATUS_SUCCESS))
					return perror("inline copy"), 1;
				iters++;
				t = now() - t0;
			} while (t < minsec);
			rate[m] = iters * (double)sz / t / 1e9;
			if (dst[sz - 1] != 0x5a)
				return fprintf(stderr, "bad data\n"), 1;
			memset(dst, 0, sz);
		}
		printf("%-6zuKiB %9.3fGB/s %9.3fGB/s %9.3fGB/s %9.3fGB/s %9.3fGB/s %8.2f\n",
		       sz >> 10, rate[0], rate[1], rate[2], rate[3], rate[4],
		       rate[1] / rate[0]);
	}
	close(pipefd[1]);
	waitpid(child, NULL, 0);
	return 0;
}
