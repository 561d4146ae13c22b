// raw: the bare mechanisms behind the LMT backends, in C, as the reference
// the Go benchmarks are held against (target: Go >= 0.9x raw).
//
//   raw MECH SHAPE SIZE ITERS [CHUNK SLOTS SLOTSIZE PIPESIZE]
//   MECH  pipe | vmsplice | cma | cma-write | cma-split | cma-split-preset | shm
//   SHAPE stream (one way, back to back) | pingpong (separate buffers)
//
// Parent and child run after fork, pinned to CPU 0 and 1 when
// KNEMESIS_BENCH_PIN is set (as the Go side then is). Prints one line:
//   raw MECH SHAPE SIZE ITERS seconds GB/s
// GB/s counts 10^9 payload bytes per second (both directions in ping-pong,
// i.e. size / half round trip, as NetPIPE does). A warm-up round precedes the
// timed one. CMA and shm use the same chunking as the Go engine (CHUNK bytes
// per process_vm_readv call, SLOTS x SLOTSIZE ring).
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long size, iters, chunk = 65536, slots = 8, slotsize = 32768, pipesize = 1 << 20;

/*
 * Every counter has a 128-byte block of its own: a writer's store must not
 * steal the line its peer is polling (128, not 64, because the adjacent-line
 * prefetcher pairs lines).
 */
struct counter {
	_Atomic unsigned long v;
	char pad[120];
};

struct flags {
	struct counter ready[2];	/* by side: messages published */
	struct counter taken[2];	/* by side: messages consumed */
	struct counter cts[2];		/* by sending side: receiver's address given */
	struct counter written[2];	/* shm ring: slots filled, per direction */
	struct counter read[2];		/* shm ring: slots emptied, per direction */
	char *buf[2][2];	/* each side's buffers (same addresses in both) */
};

static struct flags *fl;
static char *dsts[2];	/* receive buffers (same addresses in both) */

/*
 * Streaming keeps two messages in flight in two buffers a side, as the Go
 * benchmark does (window 2): the same working set in the caches.
 */
static int nbufs = 1;

static char *src_of(int side, long i)
{
	return fl->buf[side][i % nbufs];
}

static char *dst_of(long i)
{
	return dsts[i % nbufs];
}
static char *ring[2];
static int pfd[2][2];		/* pfd[d]: pipe of direction d (0: parent->child) */
static const char *mech;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

/*
 * Spin as a tuned runtime does while data moves (a yield costs a system call,
 * longer than a 32 KiB slot copy); yield only after a long idle spell, so an
 * oversubscribed machine still lets the peer run.
 */
#define WAIT_UNTIL(cond)					\
	do {							\
		for (long spins_ = 0; !(cond); spins_++) {	\
			__builtin_ia32_pause();			\
			if (spins_ >= 4096)		\
				sched_yield();			\
		}						\
	} while (0)

static void die(const char *what)
{
	perror(what);
	_exit(2);
}

static void full_write(int fd, char *p, long n, int splice)
{
	while (n > 0) {
		struct iovec iov = { p, n };
		ssize_t k = splice ? vmsplice(fd, &iov, 1, 0) : write(fd, p, n);

		if (k < 0)
			die(splice ? "vmsplice" : "write");
		p += k;
		n -= k;
	}
}

static void full_read(int fd, char *p, long n)
{
	while (n > 0) {
		ssize_t k = read(fd, p, n);

		if (k <= 0)
			die("read");
		p += k;
		n -= k;
	}
}

static pid_t peer_pid;

/* Copy [from, to) between this process and the peer, chunk by chunk. */
static void cma_copy(pid_t peer, char *mine, char *theirs, long from, long to, int write)
{
	for (long off = from; off < to;) {
		long n = to - off < chunk ? to - off : chunk;
		struct iovec l = { mine + off, n }, r = { theirs + off, n };
		ssize_t k = write ? process_vm_writev(peer, &l, 1, &r, 1, 0) :
				    process_vm_readv(peer, &l, 1, &r, 1, 0);

		if (k <= 0)
			die(write ? "process_vm_writev" : "process_vm_readv");
		off += k;
	}
}

static void cma_pull(pid_t peer, char *dst, char *src)
{
	cma_copy(peer, dst, src, 0, size, 0);
}

/*
 * cma-split: the receiver reads [0, split), the sender writes the rest.
 * A sender may write only once the receiver has said where (the cts flag,
 * the CTS of a rendezvous); cma-split-preset skips that crossing, as if the
 * sender had known the address before the message existed.
 */
static long split_point(void)
{
	return size / 2 & ~4095L;
}

/* Message number i from side `me` (direction me) to the other side. */
static void send_msg(int me, long i)
{
	if (!strcmp(mech, "pipe") || !strcmp(mech, "vmsplice")) {
		full_write(pfd[me][1], src_of(me, i), size, mech[0] == 'v');
		if (mech[0] == 'v') {
			/* spliced pages are referenced: wait until they are read */
			WAIT_UNTIL(atomic_load(&fl->taken[me].v) >= i + 1);
		}
	} else if (!strcmp(mech, "cma")) {
		atomic_store(&fl->ready[me].v, i + 1);
		WAIT_UNTIL(atomic_load(&fl->taken[me].v) >= i + 1);
	} else if (!strcmp(mech, "cma-write")) {
		atomic_store(&fl->ready[me].v, i + 1);
		WAIT_UNTIL(atomic_load(&fl->cts[me].v) >= i + 1);
		/* dst has the same address in both processes */
		cma_copy(peer_pid, src_of(me, i), dst_of(i), 0, size, 1);
		atomic_store(&fl->written[me].v, i + 1);
	} else if (!strncmp(mech, "cma-split", 9)) {
		atomic_store(&fl->ready[me].v, i + 1);
		if (strcmp(mech, "cma-split-preset"))
			WAIT_UNTIL(atomic_load(&fl->cts[me].v) >= i + 1);
		cma_copy(peer_pid, src_of(me, i), dst_of(i), split_point(), size, 1);
		atomic_store(&fl->written[me].v, i + 1);
		WAIT_UNTIL(atomic_load(&fl->taken[me].v) >= i + 1);
	} else {
		unsigned long w = atomic_load(&fl->written[me].v);
		char *src = src_of(me, i);

		for (long off = 0; off < size;) {
			long n = size - off < slotsize ? size - off : slotsize;

			WAIT_UNTIL(w - atomic_load(&fl->read[me].v) < (unsigned long)slots);
			memcpy(ring[me] + (w % slots) * slotsize, src + off, n);
			atomic_store(&fl->written[me].v, ++w);
			off += n;
		}
	}
}

static void recv_msg(int me, long i, pid_t peer)
{
	int from = 1 - me;
	char *dst = dst_of(i);

	if (!strcmp(mech, "pipe") || !strcmp(mech, "vmsplice")) {
		full_read(pfd[from][0], dst, size);
		atomic_store(&fl->taken[from].v, i + 1);
	} else if (!strcmp(mech, "cma")) {
		WAIT_UNTIL(atomic_load(&fl->ready[from].v) >= i + 1);
		cma_pull(peer, dst, src_of(from, i));
		atomic_store(&fl->taken[from].v, i + 1);
	} else if (!strcmp(mech, "cma-write")) {
		WAIT_UNTIL(atomic_load(&fl->ready[from].v) >= i + 1);
		atomic_store(&fl->cts[from].v, i + 1);
		WAIT_UNTIL(atomic_load(&fl->written[from].v) >= i + 1);
	} else if (!strncmp(mech, "cma-split", 9)) {
		WAIT_UNTIL(atomic_load(&fl->ready[from].v) >= i + 1);
		atomic_store(&fl->cts[from].v, i + 1);
		cma_copy(peer, dst, src_of(from, i), 0, split_point(), 0);
		WAIT_UNTIL(atomic_load(&fl->written[from].v) >= i + 1);
		atomic_store(&fl->taken[from].v, i + 1);
	} else {
		unsigned long r = atomic_load(&fl->read[from].v);

		for (long off = 0; off < size;) {
			long n = size - off < slotsize ? size - off : slotsize;

			WAIT_UNTIL(atomic_load(&fl->written[from].v) != r);
			memcpy(dst + off, ring[from] + (r % slots) * slotsize, n);
			atomic_store(&fl->read[from].v, ++r);
			off += n;
		}
	}
}

/*
 * Side d's buffers hold the byte 1 + d and receive buffers the byte 3: a
 * mechanism that moved the wrong bytes, too few or past the end shows here.
 */
static int received_intact(int from)
{
	for (int k = 0; k < nbufs; k++) {
		for (long j = 0; j < size; j++)
			if (dsts[k][j] != 1 + from)
				return 0;
		if (dsts[k][size] != 3)
			return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: raw pipe|vmsplice|cma|cma-write|cma-split|cma-split-preset|shm stream|pingpong SIZE ITERS [CHUNK SLOTS SLOTSIZE PIPESIZE]\n");
		return 2;
	}
	mech = argv[1];
	if (strcmp(mech, "pipe") && strcmp(mech, "vmsplice") && strcmp(mech, "cma") &&
	    strcmp(mech, "cma-write") && strcmp(mech, "cma-split") &&
	    strcmp(mech, "cma-split-preset") && strcmp(mech, "shm")) {
		fprintf(stderr, "raw: unknown mechanism %s\n", mech);
		return 2;
	}
	int pingpong = !strcmp(argv[2], "pingpong");
	size = atol(argv[3]);
	iters = atol(argv[4]);
	if (argc > 5)
		chunk = atol(argv[5]);
	if (argc > 6)
		slots = atol(argv[6]);
	if (argc > 7)
		slotsize = atol(argv[7]);
	if (argc > 8)
		pipesize = atol(argv[8]);

	fl = mmap(0, sizeof(*fl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	for (int d = 0; d < 2; d++) {
		ring[d] = mmap(0, slots * slotsize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (fl == MAP_FAILED || ring[d] == MAP_FAILED)
			die("mmap");
		/* private buffers, allocated before fork: same address in both */
		for (int k = 0; k < 2; k++) {
			fl->buf[d][k] = mmap(0, size + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (fl->buf[d][k] == MAP_FAILED)
				die("mmap");
			memset(fl->buf[d][k], 1 + d, size + 1);
		}
		if (pipe(pfd[d]))
			die("pipe");
		fcntl(pfd[d][1], F_SETPIPE_SZ, (int)pipesize);
	}
	for (int k = 0; k < 2; k++) {
		dsts[k] = mmap(0, size + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (dsts[k] == MAP_FAILED)
			die("mmap");
		memset(dsts[k], 3, size + 1);
	}
	if (!pingpong)
		nbufs = 2;

	pid_t parent = getpid(), child = fork();

	if (child < 0)
		die("fork");
	int me = child == 0;
	pid_t peer = me ? parent : child;

	peer_pid = peer;

	if (getenv("KNEMESIS_BENCH_PIN"))
		pin(me);
	double t0 = 0;
	for (int round = 0; round < 2; round++) {
		long base = round * iters;

		if (round == 1)
			t0 = now();
		for (long i = base; i < base + iters; i++) {
			if (!pingpong) {
				if (me == 0)
					send_msg(0, i);
				else
					recv_msg(1, i, peer);
			} else if (me == 0) {
				send_msg(0, i);
				recv_msg(0, i, peer);
			} else {
				recv_msg(1, i, peer);
				send_msg(1, i);
			}
		}
		/* both sides finished the round before the clock stops */
		if (me == 1) {
			atomic_store(&fl->ready[1].v, -(round + 1));
		} else {
			WAIT_UNTIL(atomic_load(&fl->ready[1].v) == -(round + 1) || pingpong || !strncmp(mech, "cma", 3));
		}
	}
	double t = now() - t0;
	/* Only the child receives in a stream; both do in ping-pong. */
	int bad = (pingpong || me == 1) && !received_intact(1 - me);
	int status;

	if (me == 1)
		_exit(bad ? 3 : 0);

	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) || bad) {
		fprintf(stderr, "raw %s: a receive buffer does not hold what was sent\n", mech);
		return 3;
	}
	double bytes = (double)size * iters * (pingpong ? 2 : 1);

	printf("raw %s %s %ld %ld %.6f %.6g\n", mech, argv[2], size, iters, t, bytes / t / 1e9);
	return 0;
}
