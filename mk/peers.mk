# lmtbench peers: the stacks users run today, measured by their own
# benchmarks beside the toolkit's rows (tools/lmtbench/internal/peers).
# The packages name tool-specific launchers (mpirun.openmpi,
# mpiexec.mpich): Open MPI and MPICH both provide the mpirun alternative.
#   netpipe-openmpi   NPopenmpi (pulls openmpi-bin: mpirun.openmpi)
#   libopenmpi-dev    mpi.h for mpicc.openmpi: lmtbench multiseg and coll build their MPI side
#   libmpich-dev      mpi.h for mpicc.mpich: lmtbench coll builds its MPICH side
#   netpipe-mpich2    NPmpich2 (pulls mpich: mpiexec.mpich, ch4:ucx)
#   ucx-utils         ucx_perftest
#   libfabric-bin     fi_pingpong (fabtests), shm provider
# Debian 12 packages neither the OSU micro-benchmarks nor IMB.
DEB_PACKAGES += openmpi-bin libopenmpi-dev netpipe-openmpi mpich libmpich-dev netpipe-mpich2 ucx-utils libfabric-bin
