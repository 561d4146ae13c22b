/*
 * The plain C references of package rma's benchmarks, run in the same
 * benchmark invocation so that Go and C are compared as a ratio:
 *
 *   cref cma-write SIZE ITERS      process_vm_writev of SIZE bytes (4 MiB
 *                                  calls) into a child process, ITERS times
 *   cref memcpy-shared SIZE ITERS  memcpy of SIZE bytes into a mapping a
 *                                  child process shares, ITERS times
 *   cref flag-pingpong LINES ITERS ping-pong of 8 bytes with a child through
 *                                  a shared mapping, ITERS round trips: with
 *                                  LINES 1 the bytes ride in the line of the
 *                                  flag that announces them (a fastbox);
 *                                  with 2 they sit in a line of their own
 *                                  two lines on, where the prefetcher
 *                                  fetches them along with the flag's; with
 *                                  3 in a line 2 KiB away, as a put's bytes
 *                                  in a window lie far from the slot of its
 *                                  notification
 *
 * Prints "GB/s <value>" (10^9 bytes per second), or for flag-pingpong
 * "us <value>", the one-way time in microseconds.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (4UL << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* child: hold buf, send its address, wait until told to go */
static void child(int out, int in, char *buf, size_t size)
{
	char c;
	uintptr_t addr = (uintptr_t)buf;

	memset(buf, 1, size);
	if (write(out, &addr, sizeof(addr)) != sizeof(addr))
		_exit(1);
	if (read(in, &c, 1) < 0)
		_exit(1);
	_exit(0);
}

/*
 * One direction of flag-pingpong: a flag line and the data, in it (LINES
 * 1), 128 bytes on (2) or 2 KiB on (3); each direction 4 KiB apart.
 */
struct box {
	volatile uint64_t *flag;
	volatile uint64_t *data;
};

static struct box box_at(char *mem, int dir, int lines)
{
	struct box b;

	static const int data_at[] = { 0, 8, 128, 2048 };

	b.flag = (volatile uint64_t *)(mem + 4096 * dir);
	b.data = (volatile uint64_t *)(mem + 4096 * dir + data_at[lines]);
	return b;
}

static void post(struct box b, uint64_t seq, uint64_t v)
{
	*b.data = v;
	__atomic_store_n(b.flag, seq, __ATOMIC_RELEASE);
}

static uint64_t await(struct box b, uint64_t seq)
{
	while (__atomic_load_n(b.flag, __ATOMIC_ACQUIRE) != seq)
		;
	return *b.data;
}

static int flag_pingpong(int lines, size_t iters)
{
	char *mem = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct box out, back;
	double t0, t;
	uint64_t v = 0;
	size_t i;
	pid_t pid;

	if (mem == MAP_FAILED || lines < 1 || lines > 3) {
		fprintf(stderr, "cref flag-pingpong: LINES is 1, 2 or 3\n");
		return 1;
	}
	out = box_at(mem, 0, lines);
	back = box_at(mem, 1, lines);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		for (i = 1; i <= iters + 1; i++)
			post(back, i, await(out, i));
		_exit(0);
	}
	post(out, 1, 1); /* warm both sides up */
	await(back, 1);
	t0 = now();
	for (i = 2; i <= iters + 1; i++) {
		post(out, i, v + i);
		v = await(back, i);
	}
	t = now() - t0;
	waitpid(pid, NULL, 0);
	printf("us %.4f\n", t / iters / 2 * 1e6);
	return 0;
}

int main(int argc, char **argv)
{
	int up[2], down[2], shared;
	size_t size, iters, i, off;
	char *src, *dst;
	uintptr_t addr;
	double t0, t;
	pid_t pid;

	if (argc != 4) {
		fprintf(stderr, "usage: cref cma-write|memcpy-shared SIZE ITERS | flag-pingpong LINES ITERS\n");
		return 2;
	}
	if (strcmp(argv[1], "flag-pingpong") == 0)
		return flag_pingpong(atoi(argv[2]), strtoul(argv[3], NULL, 0));
	shared = strcmp(argv[1], "memcpy-shared") == 0;
	size = strtoul(argv[2], NULL, 0);
	iters = strtoul(argv[3], NULL, 0);
	src = malloc(size);
	if (shared)
		dst = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	else
		dst = malloc(size);
	if (!src || dst == MAP_FAILED || !dst || pipe(up) || pipe(down)) {
		perror("cref");
		return 1;
	}
	memset(src, 2, size);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0)
		child(up[1], down[0], dst, size);
	if (read(up[0], &addr, sizeof(addr)) != sizeof(addr)) {
		perror("read");
		return 1;
	}
	t0 = now();
	for (i = 0; i < iters; i++) {
		if (shared) {
			memcpy(dst, src, size);
			continue;
		}
		for (off = 0; off < size; off += CHUNK) {
			size_t n = size - off < CHUNK ? size - off : CHUNK;
			struct iovec l = { src + off, n };
			struct iovec r = { (void *)(addr + off), n };

			if (process_vm_writev(pid, &l, 1, &r, 1, 0) != (ssize_t)n) {
				perror("process_vm_writev");
				return 1;
			}
		}
	}
	t = now() - t0;
	if (write(down[1], "x", 1) != 1)
		return 1;
	waitpid(pid, NULL, 0);
	printf("GB/s %.3f\n", size * (double)iters / t / 1e9);
	return 0;
}
