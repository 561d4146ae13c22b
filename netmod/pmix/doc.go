// Package pmix is the PMIx client through which a knemesis job started by
// the launchers sites use (Open MPI's mpirun, Slurm's srun) finds its place
// and exchanges network addresses. nemesis/launch stays for single-node
// jobs that knemesis starts itself.
//
// # Build
//
// The package needs the PMIx client library (Debian 12: libpmix-dev 4.2)
// and is built only with the build tag pmix:
//
//	go test -tags "pmix ofi" ./netmod/pmix
//
// Without the tag it is an empty package. `make test` builds and tests it
// with the tag (mk/fabric.mk).
//
// # The contract
//
// Init connects to the launcher's PMIx server (PMIx_Init) and learns the
// process's namespace and rank, the job's size (PMIX_JOB_SIZE) and the
// node it runs on (PMIX_NODEID; from a server that gives none, its host's
// number among the job's distinct PMIX_HOSTNAMEs in rank order). A
// process that no launcher started fails Init with ErrNotLaunched.
//
// Addresses are exchanged the PMI way: every rank Puts its values (global
// scope), Commits them, and takes part in one Fence that collects the
// data; then any rank may Get any other's values. Finalize ends the client.
//
// # Simulated nodes
//
// A test that runs every rank on one machine but wants them on several
// "nodes" sets EnvNodeMap (KNEMESIS_NODE_MAP) to the node id of every rank
// in rank order, such as "0,0,1,1": Node and NodeOf then answer from it
// instead of the launcher. mpirun passes it to every rank with -x.
//
// # Versions
//
// The client and the server must speak the same PMIx. Debian 12's Open MPI
// (4.1.4, openmpi-bin) is built against the system PMIx
// (--with-pmix=/usr/lib/x86_64-linux-gnu/pmix2; its mca_pmix_ext3x
// component links libpmix.so.2), the very libpmix2 4.2.2 this package
// links, so mpirun's server and this client are one library.
package pmix
