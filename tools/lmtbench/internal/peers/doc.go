// Package peers runs the message-passing stacks a user already has, through
// their own benchmark programs, so that lmtbench can put them in the same
// table as the toolkit's backends: Open MPI and MPICH through NetPIPE
// (Snell, Mikler and Gustafson, "NetPIPE: A Network Protocol Independent
// Performance Evaluator", 1996), UCX through ucx_perftest and libfabric's
// shm provider through fabtests' fi_pingpong.
//
// A Peer is one row: a stack with one configuration (Open MPI's default,
// Open MPI with vader's single copy off, UCX with UCX_TLS=posix, …), the
// program that measures it, the Debian package that provides that program,
// and the shapes the program can measure, named as lmtbench's modes:
// "pingpong" (IMB's ping-pong, separate send and receive buffers:
// ucx_perftest tag_lat, fi_pingpong), "netpipe" (ping-pong sending back
// the buffer just received: NetPIPE) and "stream" (NetPIPE -s,
// ucx_perftest tag_bw). Run measures one size once and returns a
// Measurement in lmtbench's units, converted from the tool's own: NetPIPE
// prints Mbps of 2^20 bits per second, ucx_perftest MB/s of 2^20 bytes,
// fi_pingpong MB/sec of 10^6 bytes. Latency is always the time per
// message (half the round trip in ping-pong) and throughput is size over
// that time.
//
// Every command is run exactly as printed by Invocation.String, with the
// two processes pinned the way lmtbench pins its own ranks (mpirun's
// binding for the MPI stacks, -c for ucx_perftest, taskset for
// fi_pingpong). The number of iterations is given on the command line so
// that a sample lasts about as long as one of the toolkit's; each tool
// keeps its own conventions beyond that (NetPIPE reports the best of its
// three trials, ucx_perftest runs its warm-up iterations first).
//
// A Peer whose program is not installed reports a *NotInstalled error
// naming the Debian package to install.
package peers
