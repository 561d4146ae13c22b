package pmix

import (
	"os"
	"strconv"
)

// Launched reports whether a PMIx launcher (Open MPI's mpirun, Slurm's
// srun --mpi=pmix) started this process: every PMIx server gives its
// children PMIX_NAMESPACE and PMIX_RANK (PMIx_server_setup_fork). It needs
// no build tag, so that a program built without PMIx can tell its user
// that it was started by one; Init still decides by connecting.
func Launched() bool {
	return os.Getenv("PMIX_NAMESPACE") != "" && os.Getenv("PMIX_RANK") != ""
}

// LaunchedRank is the rank a PMIx launcher gave this process, -1 when none
// did.
func LaunchedRank() int {
	if !Launched() {
		return -1
	}
	r, err := strconv.Atoi(os.Getenv("PMIX_RANK"))
	if err != nil || r < 0 {
		return -1
	}
	return r
}
