// Package coll gives a knemesis job MPI's communicators and collective
// operations, on top of the endpoint's point-to-point messages
// (nemesis.Endpoint, or the one knemesis.Join returns) and, within a node,
// shared memory.
//
//	ep, _ := knemesis.Join(job, rank, size, nil)
//	world := coll.World(ep)
//	sum := make([]float64, len(x))
//	err := coll.Allreduce(world, x, sum, coll.Sum[float64]())
//	half, _ := world.Split(world.Rank()%2, world.Rank())
//	req, _ := coll.Ibcast(half, buf, 0) // … then req.Wait()
//
// # Communicators
//
// World is every rank of the job; Split (MPI_Comm_split), SplitShared
// (MPI_COMM_TYPE_SHARED: the ranks of one node) and Dup make new ones,
// Free releases them and Abort ends their processes. Each has a context
// id, agreed by its ranks when it is made, carried in the tag of every
// message of its collectives: nemesis's library tags, above MaxTag, which
// the application's calls refuse and its AnyTag never matches (tag.go has
// the layout), so collective traffic never meets an application's
// receive, nor another communicator's. Ranks on other nodes take part
// through the endpoint's network module like local ones.
//
// # Operations
//
// Barrier, Bcast, Reduce, Allreduce, Gather(v), Scatter(v), Allgather(v),
// Alltoall(v), ReduceScatter, Scan and Exscan, each blocking and
// nonblocking (I…: a *Request to Wait or Test on), generic over Go's
// numeric types (Number), with the reductions Sum, Prod, Min, Max, the
// bitwise and logical ones and NewOp for a user's; in place by passing
// one buffer as both (see typed.go). Slices move as their bytes, through
// unsafe.Slice, with no encoding. Any Wait or Test advances every
// collective outstanding on the endpoint, so collectives on different
// communicators may be outstanding at once and completed in any order.
//
// Every reduction's result is the rank-order fold, ((a0 op a1) op a2)…,
// on every rank whatever the algorithm: bit-identical everywhere, and
// right for operations that do not commute.
//
// # Algorithms
//
// The algorithm depends on the operation, the size and the communicator
// only, so that every rank makes the same choice; docs/design/coll.md
// describes each.
//
// # Failures
//
// Every message starts with a 16-byte header (header.go) that the
// receiver checks against its own call: a rank that called another
// operation, element type, reduction or count gets a *MismatchError. A
// rank whose collective fails (a mismatch, a bad argument, a peer that
// died, an impossible value in a peer's shared lines) sends every other
// rank of the communicator a notice, and a rank that waits looks for
// notices and for crashed ranks, so that each gets an *Error whose Origin
// names the rank where the failure began and nobody waits for ever. The
// communicator is then broken: its later collectives fail with ErrBroken.
//
// A Comm, like its endpoint, belongs to one goroutine, and the ranks of a
// communicator call its collectives in the same order.
package coll
