/* The MPI side of lmtbench coll: OSU-style latency of one collective at
 * one size. Arguments: operation (barrier, bcast, allreduce, alltoall,
 * is), bytes (per rank; per pair for alltoall; of keys per rank for is),
 * iterations, warm-up iterations. Rank 0 prints {"Nanos":N,"Iters":I}:
 * the slowest rank's time for the timed iterations, as OSU reports the
 * max; for is also "Checksum":C, that of the keys generated, which the
 * sort preserved (else the program aborts).
 *
 * is is the IS-like kernel of collbench/is.go, step for step and with the
 * same generator, so that both sides sort the same keys. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IS_KEY_BITS 16
#define IS_SEED 0x5eed1e55ULL
#define GOLDEN 0x9e3779b97f4a7c15ULL

static long long now(void);

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int is_owner(uint32_t k, int n) { return (int)(((uint64_t)k * (uint64_t)n) >> IS_KEY_BITS); }

static uint32_t is_first(int r, int n)
{
	return (uint32_t)((((uint64_t)r << IS_KEY_BITS) + (uint64_t)n - 1) / (uint64_t)n);
}

static uint64_t is_checksum(const uint32_t *k, long count)
{
	uint64_t sum = 0;
	for (long i = 0; i < count; i++)
		sum += mix64((uint64_t)k[i] + 1);
	return sum;
}

static void is_fail(const char *what, int rank, long a, long b)
{
	fprintf(stderr, "coll is: rank %d: %s (%ld, %ld)\n", rank, what, a, b);
	MPI_Abort(MPI_COMM_WORLD, 3);
}

/* run_is times iters iterations of the kernel after warmup, then checks
 * the result; *sum is the job's checksum of the generated keys. */
static long long run_is(long bytes, int iters, int warmup, uint64_t *sum)
{
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	long count = bytes / 4 > 0 ? bytes / 4 : 1;
	uint32_t *keys = malloc(count * 4), *snd = malloc(count * 4);
	uint32_t *rcv = malloc((size_t)n * count * 4), *sorted = malloc((size_t)n * count * 4);
	int *sc = calloc(n, sizeof(int)), *sd = calloc(n, sizeof(int)), *rc = calloc(n, sizeof(int)),
	    *rd = calloc(n, sizeof(int)), *cur = calloc(n, sizeof(int));
	uint32_t lo = is_first(rank, n), hi = is_first(rank + 1, n);
	long *bins = calloc(hi - lo, sizeof(long));
	uint64_t s = IS_SEED ^ ((uint64_t)(rank + 1) * GOLDEN);
	for (long i = 0; i < count; i++) {
		s += GOLDEN;
		uint64_t z = mix64(s);
		keys[i] = (uint32_t)(((z & 0xffff) + ((z >> 16) & 0xffff) + ((z >> 32) & 0xffff) + (z >> 48)) >> 2);
	}
	long nrecv = 0, nsorted = 0;
	long long t0 = 0;
	for (int it = 0; it < warmup + iters; it++) {
		if (it == warmup) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = now();
		}
		memset(sc, 0, n * sizeof(int));
		for (long i = 0; i < count; i++)
			sc[is_owner(keys[i], n)]++;
		for (int d = 0, off = 0; d < n; d++) {
			sd[d] = cur[d] = off;
			off += sc[d];
		}
		for (long i = 0; i < count; i++)
			snd[cur[is_owner(keys[i], n)]++] = keys[i];
		MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, MPI_COMM_WORLD);
		nrecv = 0;
		for (int r = 0; r < n; r++) {
			if (rc[r] < 0 || nrecv + rc[r] > (long)n * count)
				is_fail("a rank sends more keys than fit", rank, r, rc[r]);
			rd[r] = (int)nrecv;
			nrecv += rc[r];
		}
		MPI_Alltoallv(snd, sc, sd, MPI_UINT32_T, rcv, rc, rd, MPI_UINT32_T, MPI_COMM_WORLD);
		memset(bins, 0, (hi - lo) * sizeof(long));
		for (long i = 0; i < nrecv; i++) {
			if (rcv[i] < lo || rcv[i] >= hi)
				is_fail("received a key outside its range", rank, i, rcv[i]);
			bins[rcv[i] - lo]++;
		}
		nsorted = 0;
		for (uint32_t k = lo; k < hi; k++)
			for (long c = 0; c < bins[k - lo]; c++)
				sorted[nsorted++] = k;
	}
	long long mine = now() - t0, slowest = 0;
	MPI_Reduce(&mine, &slowest, 1, MPI_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
	for (long i = 0; i < nsorted; i++)
		if (sorted[i] < lo || sorted[i] >= hi || (i > 0 && sorted[i] < sorted[i - 1]))
			is_fail("sorted keys out of order or range", rank, i, sorted[i]);
	uint64_t local[2] = {is_checksum(keys, count), is_checksum(sorted, nsorted)}, global[2];
	long long nk[2] = {count, nsorted}, gk[2];
	MPI_Allreduce(local, global, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	MPI_Allreduce(nk, gk, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (gk[0] != gk[1])
		is_fail("keys generated and sorted differ", rank, (long)gk[0], (long)gk[1]);
	if (global[0] != global[1])
		is_fail("checksums before and after differ", rank, (long)global[0], (long)global[1]);
	*sum = global[0];
	free(keys); free(snd); free(rcv); free(sorted); free(sc); free(sd); free(rc); free(rd); free(cur); free(bins);
	return slowest;
}

static long long now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	if (argc != 5) {
		fprintf(stderr, "usage: coll op bytes iters warmup\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const char *op = argv[1];
	long bytes = atol(argv[2]);
	int iters = atoi(argv[3]), warmup = atoi(argv[4]);
	int size, rank;
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (strcmp(op, "is") == 0) {
		uint64_t sum = 0;
		long long slowest = run_is(bytes, iters, warmup, &sum);
		if (rank == 0)
			printf("{\"Nanos\":%lld,\"Iters\":%d,\"Checksum\":%llu}\n", slowest, iters, (unsigned long long)sum);
		MPI_Finalize();
		return 0;
	}
	long count = bytes / 8 > 0 ? bytes / 8 : 1;
	size_t room = (size_t)(strcmp(op, "alltoall") == 0 ? bytes * size : count * 8);
	char *a = malloc(room + 8), *b = malloc(room + 8);
	memset(a, 1, room + 8);
	memset(b, 0, room + 8);
	long long t0 = 0;
	for (int i = 0; i < warmup + iters; i++) {
		if (i == warmup) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = now();
		}
		if (strcmp(op, "barrier") == 0)
			MPI_Barrier(MPI_COMM_WORLD);
		else if (strcmp(op, "bcast") == 0)
			MPI_Bcast(a, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
		else if (strcmp(op, "allreduce") == 0)
			MPI_Allreduce(a, b, (int)count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		else if (strcmp(op, "alltoall") == 0)
			MPI_Alltoall(a, (int)bytes, MPI_BYTE, b, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
		else
			MPI_Abort(MPI_COMM_WORLD, 2);
	}
	long long mine = now() - t0, slowest = 0;
	MPI_Reduce(&mine, &slowest, 1, MPI_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rank == 0)
		printf("{\"Nanos\":%lld,\"Iters\":%d}\n", slowest, iters);
	free(a);
	free(b);
	MPI_Finalize();
	return 0;
}
