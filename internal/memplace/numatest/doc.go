// Package numatest holds the placement tests that need a machine with two
// NUMA nodes or more. The QEMU guests of make test-kernel are such
// machines (ci/test-kernel.sh gives each vCPU its own node); on a one-node
// host the tests skip, naming the capability they lack.
package numatest
