# rma: BenchmarkVsOpenMPI builds rma/testdata/osc.c (MPI_Put/MPI_Get,
# passive target) with Open MPI's mpicc, whose headers are in
# libopenmpi-dev; mpirun.openmpi comes with openmpi-bin (mk/peers.mk).
DEB_PACKAGES += libopenmpi-dev
