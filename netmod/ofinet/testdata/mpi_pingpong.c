/*
 * A ping-pong between ranks 0 and 1 over MPI, printed the way fi_pingpong
 * and netbench print theirs (microseconds per one-way transfer, MB/s of
 * 10^6 bytes): Open MPI's reference for bench.sh, run over its tcp BTL.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void pingpong(int rank, char *buf, int size, int iters)
{
	double t0 = 0;

	for (int i = -iters / 10 - 1; i < iters; i++) {
		if (i == 0)
			t0 = MPI_Wtime();
		if (rank == 0) {
			MPI_Send(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
		}
	}
	if (rank == 0) {
		double us = (MPI_Wtime() - t0) * 1e6 / (2.0 * iters);

		printf("mpi %-36d path=%-22s bytes=%-8d iters=%-6d usec/xfer=%.3f MB/sec=%.2f\n",
		       size, "tcp btl", size, iters, us, size / us);
	}
}

int main(int argc, char **argv)
{
	int rank, iters = argc > 1 ? atoi(argv[1]) : 10000;
	char *buf = calloc(1, 4 << 20);

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (buf && rank < 2) {
		pingpong(rank, buf, 8, iters);
		pingpong(rank, buf, 4 << 20, iters / 200 > 20 ? iters / 200 : 20);
	}
	free(buf);
	MPI_Finalize();
	return 0;
}
