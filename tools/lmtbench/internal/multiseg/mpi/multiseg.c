/*
 * The multiseg ping-pong over MPI: segs segments of size bytes each way,
 * one MPI_Isend and one MPI_Irecv per segment, tagged by its index;
 * receives posted first. Prints the nanoseconds of iters round trips
 * after warmup untimed ones, as JSON: {"Nanos":N,"Iters":I}.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int check(char **recv, int segs, int size)
{
	for (int i = 0; i < segs; i++)
		for (int j = 0; j < size; j++)
			if ((unsigned char)recv[i][j] != (unsigned char)(i * 131 + j))
				return -1;
	return 0;
}

int main(int argc, char **argv)
{
	int rank, segs, size, iters, warmup;
	char **sbuf, **rbuf;
	MPI_Request *sreq, *rreq;
	double t0 = 0;

	MPI_Init(&argc, &argv);
	if (argc != 5) {
		fprintf(stderr, "usage: multiseg SEGS SIZE ITERS WARMUP\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	segs = atoi(argv[1]);
	size = atoi(argv[2]);
	iters = atoi(argv[3]);
	warmup = atoi(argv[4]);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	sbuf = calloc(segs, sizeof(*sbuf));
	rbuf = calloc(segs, sizeof(*rbuf));
	sreq = calloc(segs, sizeof(*sreq));
	rreq = calloc(segs, sizeof(*rreq));
	if (!sbuf || !rbuf || !sreq || !rreq)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (int i = 0; i < segs; i++) {
		sbuf[i] = malloc(size + 1);
		rbuf[i] = calloc(1, size + 1);
		if (!sbuf[i] || !rbuf[i])
			MPI_Abort(MPI_COMM_WORLD, 1);
		for (int j = 0; j < size; j++)
			sbuf[i][j] = (char)(i * 131 + j);
	}
	for (int it = 0; it < warmup + iters; it++) {
		if (it == warmup)
			t0 = MPI_Wtime();
		for (int i = 0; i < segs; i++)
			MPI_Irecv(rbuf[i], size, MPI_BYTE, 1 - rank, i, MPI_COMM_WORLD, &rreq[i]);
		if (rank == 1)
			MPI_Waitall(segs, rreq, MPI_STATUSES_IGNORE);
		for (int i = 0; i < segs; i++)
			MPI_Isend(sbuf[i], size, MPI_BYTE, 1 - rank, i, MPI_COMM_WORLD, &sreq[i]);
		MPI_Waitall(segs, sreq, MPI_STATUSES_IGNORE);
		if (rank == 0)
			MPI_Waitall(segs, rreq, MPI_STATUSES_IGNORE);
	}
	if (check(rbuf, segs, size)) {
		fprintf(stderr, "multiseg: rank %d received corrupt segments\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (rank == 0)
		printf("{\"Nanos\":%lld,\"Iters\":%d}\n", (long long)((MPI_Wtime() - t0) * 1e9), iters);
	MPI_Finalize();
	return 0;
}
