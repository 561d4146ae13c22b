/* The MPI side of lmtbench coll: OSU-style latency of one collective at
 * one size. Arguments: operation (barrier, bcast, allreduce, alltoall),
 * bytes (per rank; per pair for alltoall), iterations, warm-up
 * iterations. Rank 0 prints {"Nanos":N,"Iters":I}: the slowest rank's
 * time for the timed iterations, as OSU reports the max. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
	int size;
	MPI_Comm_size(MPI_COMM_WORLD, &size);
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
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (rank == 0)
		printf("{\"Nanos\":%lld,\"Iters\":%d}\n", slowest, iters);
	free(a);
	free(b);
	MPI_Finalize();
	return 0;
}
