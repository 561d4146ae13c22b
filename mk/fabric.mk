# Network modules (issue 30): libfabric through cgo (netmod/ofi, build tag
# ofi) and the PMIx client (netmod/pmix, build tag pmix), tested with Open
# MPI's mpirun and Slurm's srun as the PMIx server. The plain build stays pure Go; this
# target builds, vets and tests the cgo packages with their tags, the tests
# under cgocheck2, which fails a Go pointer stored in C memory unpinned.
# iproute2: the simulated two-node test (network namespaces, veth).
# libopenmpi-dev: mpicc, for netmod/ofinet/bench.sh's Open MPI reference.
# slurmctld, slurmd, slurm-client: TestUnderSrun starts the same job under
# srun --mpi=pmix, in a private one-node cluster (ci/slurm-local.sh).
# The multi-node lmtbench (tools/lmtbench built with the same tags) is run
# under mpirun by its TestAcrossNodes alone: the rest of its tests run in
# test-go. examples/twonodes, built with the same tags, runs under mpirun
# and must print its want.txt (the other examples run in test-go).
DEB_PACKAGES += libfabric-dev libfabric-bin libpmix-dev openmpi-bin iproute2 libopenmpi-dev \
	slurmctld slurmd slurm-client
TEST_TARGETS += test-netmod

NETMOD_TAGS := ofi pmix

.PHONY: test-netmod
test-netmod: $(TESTLOG)
	$(GO) vet -tags "$(NETMOD_TAGS)" ./netmod/... ./tools/lmtbench/... ./examples/...
	export GOEXPERIMENT=cgocheck2; $(call go_test,test-netmod,-count=1 -timeout 10m -tags "$(NETMOD_TAGS)" ./netmod/...)
	export GOEXPERIMENT=cgocheck2; $(call go_test,test-netmod-lmtbench,-count=1 -timeout 10m -tags "$(NETMOD_TAGS)" -run '^TestAcrossNodes$$' ./tools/lmtbench)
	@echo "examples/twonodes under mpirun, two nodes of two ranks"
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	$(GO) build -tags "$(NETMOD_TAGS)" -o "$$d/twonodes" ./examples/twonodes && \
	$(EXAMPLES_NET_RUN) "$$d/twonodes" > "$$d/out" && \
	diff -u examples/twonodes/want.txt "$$d/out"

# The two-node example's run, as netmod/ofinet's TestUnderMpirun starts its
# job: two simulated nodes of two ranks on this machine.
EXAMPLES_NET_RUN = mpirun --oversubscribe --allow-run-as-root -np 4 -x KNEMESIS_NODE_MAP=0,0,1,1

# make lmtbench-net: the multi-node lmtbench on two simulated nodes of this
# machine (KNEMESIS_NODE_MAP=0,0,1, the loopback): rank 0 with rank 2 over
# the network module, then with rank 1 over the segment, in one go.
# LMTBENCH_NET_ARGS picks the shape and sizes.
LMTBENCH_NET_ARGS ?= pingpong --sizes 8,64K,1M,4M
LMTBENCH_NET_RUN = mpirun --oversubscribe --allow-run-as-root -np 3 -x KNEMESIS_NODE_MAP=0,0,1

.PHONY: lmtbench-net
lmtbench-net:
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	$(GO) build -tags "$(NETMOD_TAGS)" -o "$$d/lmtbench" ./tools/lmtbench && \
	$(LMTBENCH_NET_RUN) "$$d/lmtbench" $(LMTBENCH_NET_ARGS) --node 127.0.0.1 && \
	$(LMTBENCH_NET_RUN) "$$d/lmtbench" $(LMTBENCH_NET_ARGS) --node 127.0.0.1 --peer 1
