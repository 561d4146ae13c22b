/*
 * Open MPI's one-sided communication (osc), passive target, measured the
 * way package rma's BenchmarkVsOpenMPI measures its own windows, in the
 * same run, so that the two compare as a ratio:
 *
 *   mpirun -np 2 osc allocate|create SIZE...
 *
 * Rank 0 locks rank 1's part with MPI_Win_lock_all and, for each size and
 * for MPI_Put then MPI_Get:
 *   latency    ITERS times: one operation, then MPI_Win_flush(1), which
 *              completes it at the target (rma: Put or Get, then Wait);
 *   throughput ROUNDS times: BURST operations, then one MPI_Win_flush(1)
 *              (rma: BURST operations in flight, then Flush(1)).
 * Rank 1 only waits in MPI_Barrier: passive target.
 *
 * "allocate" makes the window with MPI_Win_allocate (osc/sm: the parts in
 * one shared mapping, as rma.Allocate), "create" with MPI_Win_create over
 * memory of the process's own (osc/rdma or pt2pt over vader's single copy,
 * as rma.Expose).
 *
 * Prints, per size and operation:
 *   put|get SIZE ITERS LATENCY_US ROUNDS GB_PER_S
 * (10^9 bytes per second).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BURST 16

/* Iterations and rounds move about the same bytes whatever the size, as
 * the Go side's (keep the two in step). */
static long clamp(long v, long lo, long hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

long osc_iters(long size) { return clamp((256L << 20) / (size + 1), 20, 20000); }
long osc_rounds(long size) { return clamp((1024L << 20) / (BURST * (size + 1)), 5, 2000); }

static void op(int get, char *buf, long size, MPI_Win win)
{
	if (get)
		MPI_Get(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
	else
		MPI_Put(buf, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win);
}

static void measure(int get, long size, char *buf, MPI_Win win)
{
	long iters = osc_iters(size), rounds = osc_rounds(size), i, k;
	double t0, lat, bw;

	for (i = 0; i < 10; i++) { /* warm-up */
		op(get, buf, size, win);
		MPI_Win_flush(1, win);
	}
	t0 = MPI_Wtime();
	for (i = 0; i < iters; i++) {
		op(get, buf, size, win);
		MPI_Win_flush(1, win);
	}
	lat = (MPI_Wtime() - t0) / iters * 1e6;
	t0 = MPI_Wtime();
	for (i = 0; i < rounds; i++) {
		for (k = 0; k < BURST; k++)
			op(get, buf, size, win);
		MPI_Win_flush(1, win);
	}
	bw = (double)size * BURST * rounds / (MPI_Wtime() - t0) / 1e9;
	printf("%s %ld %ld %.3f %ld %.3f\n", get ? "get" : "put", size, iters, lat, rounds, bw);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int rank, nranks, a, get;
	long max = 0, size;
	char *base, *buf;
	MPI_Win win;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2 || argc < 3 ||
	    (strcmp(argv[1], "allocate") && strcmp(argv[1], "create"))) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np 2 %s allocate|create SIZE...\n", argv[0]);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (a = 2; a < argc; a++) {
		size = atol(argv[a]);
		if (size <= 0 || size > (1L << 30)) {
			if (rank == 0)
				fprintf(stderr, "osc: size %s out of 1..2^30\n", argv[a]);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		max = size > max ? size : max;
	}
	if (!strcmp(argv[1], "allocate")) {
		MPI_Win_allocate(max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	} else {
		base = malloc(max);
		if (!base)
			MPI_Abort(MPI_COMM_WORLD, 1);
		MPI_Win_create(base, max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	}
	memset(base, 1, max);
	buf = malloc(max);
	if (!buf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	memset(buf, 2, max);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock_all(0, win);
		for (a = 2; a < argc; a++)
			for (get = 0; get < 2; get++)
				measure(get, atol(argv[a]), buf, win);
		MPI_Win_unlock_all(win);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_free(&win);
	if (strcmp(argv[1], "allocate"))
		free(base);
	free(buf);
	MPI_Finalize();
	return 0;
}
