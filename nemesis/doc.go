// Package nemesis moves messages between the processes of a job through
// lock-free queues and fastboxes in one shared memory segment, after
// Buntinas, Mercier and Gropp, "Design and Evaluation of Nemesis" (CCGRID
// 2006). docs/design/nemesis.md tells how and why it is built so.
//
// # Contract
//
// [Join] makes this process rank r of a job of n ranks named job; every
// rank must call it, and it returns once all have mapped the segment
// (Options.JoinTimeout bounds the wait). The segment is a sealed memfd
// that the creator hands out over a socket in a 0700 directory at the
// job's name (from its key: Options.JobKey or the launcher's, see
// [Endpoint.JobKey]): no rank can resize it, no other user join it
// (shmfile.ErrNotPrivate), and nothing is left once all have joined. A job that does not fit its directory
// fails Join with a *SpaceError; a local peer in another pid namespace,
// with a *NamespaceError.
//
// An [Endpoint] gives MPI point-to-point semantics: Send and Recv, Isend
// and Irecv with Test and Wait, tags, AnySource and AnyTag, Probe, and
// non-overtaking order per (source, tag). A receive buffer shorter than
// the message gets ErrTruncated, filled and nothing written past it.
// Isendv/Irecvv take iovec lists, IsendType/IrecvType a base buffer and a
// derived datatype (package datatype); any send form matches any receive
// form. WaitAll, WaitAny and TestSome complete slices of requests, Sendrecv
// sends and receives at once; Cancel takes back a receive not yet matched
// (ErrCanceled; ErrMatched once matched), and Improbe or Mprobe take a
// message out of matching for Imrecv or Mrecv alone to receive.
//
// An Endpoint belongs to one goroutine: there is no lock and no progress
// goroutine. One Poll (every Test and Wait polls) advances everything:
// queued sends, fastboxes, the receive queue and an attached LMT. Requests
// are caller-owned values; Isend and Irecv allocate nothing. A blocked
// call polls, then yields, then sleeps in futex(2) until a peer hands it
// work, so a job with more ranks than cores still runs.
//
// Messages up to the eager limit go through fastboxes or cells. Longer
// ones go as a series of cells, or, once an LMT is set ([Endpoint.SetLMT],
// done by packages attach and auto), by rendezvous: the RTS travels in
// sequence with the eager messages and the LMT moves the payload.
// With Options.ArenaSize, [Endpoint.Alloc] hands out buffers that every
// rank maps; a message sent from them is received with one copy and no
// system call.
//
// With Options.Net, only the ranks of this node share the segment; the
// others are reached through a [NetModule] (package netmod/ofinet), with
// the same matching, order and errors.
//
// # Faults
//
// A blocked call checks every Options.LivenessInterval whether its peers
// live. What a dead rank sent before dying is still delivered; then sends
// to it, receives from it and (if it crashed rather than closed) wildcard
// receives fail with a *[PeerError] naming it. Every field another
// process wrote is checked before use: a corrupted queue link or header
// fails the endpoint with ErrCorrupt, never reads or writes outside the
// segment. Two faults are not repaired: a rank that dies inside an
// enqueue cuts the receive queue behind it, and the cells a dead rank held
// are lost to their owners.
package nemesis
