// Package nemesis moves small messages between the processes of a job on one
// machine through lock-free queues in shared memory, after Buntinas, Mercier
// and Gropp, "Design and Evaluation of Nemesis" (CCGRID 2006).
//
// # The picture
//
// A job of N processes shares one memory segment (a /dev/shm file named
// after the job; see "Segment lifetime"). In it every process owns
//
//   - a receive queue, the only place it polls for messages from anyone;
//   - a free queue of fixed-size cells (Options.Cells of Options.CellSize
//     bytes), from which it takes a cell whenever it sends;
//   - a pool of fastbox sets (Options.Fastboxes), each three single-message
//     mailboxes with a full/empty flag, taken in turn: the process sends
//     through one set to each of the peers it talks to most;
//   - a bell: one bit per sender, and the word it sleeps on.
//
// To send, a process dequeues a cell from its own free queue, copies the
// message into it and enqueues it on the receiver's receive queue. The
// receiver dequeues it, delivers the payload, and enqueues the cell back on
// the free queue of the process it came from. This is the paper's "design
// variation 3" (free queues local to the sender): a sender never runs out of
// cells because of other senders, and its cells are in memory it touched
// last. Both queues have many producers and one consumer, so one algorithm
// serves both.
//
// # The queue (Fig. 3)
//
// Elements are cells named by their offset in the segment, never by address:
// each process may map the segment elsewhere. Enqueue is one atomic SWAP of
// the tail, then either a store of the head (the queue was empty) or of the
// previous tail's next link. Dequeue takes the head; if the head has no next
// link it tries to CAS the tail from that cell to empty; if the CAS fails an
// enqueuer is between its SWAP and its link, and the dequeuer waits for the
// link (here: a short spin, then "nothing yet", retried at the next Poll, so
// a descheduled enqueuer never blocks the dequeuer's caller).
//
// Head and tail share a cache line: enqueueing on an empty queue and taking
// its last element then cost one miss. The dequeuer works from a shadow head
// on another line (§3.1), reading the shared head only when its shadow runs
// out, so enqueuers writing the tail and the dequeuer walking a long queue do
// not false-share. Every offset read from shared memory is checked to name a
// cell before it is used: a corrupted link fails the endpoint with
// ErrCorrupt instead of reading or writing outside the cells.
//
// What a sender writes for its receiver (a cell's header, a fastbox's, a
// line record's fields, an aggregate cell's entries, an arena descriptor,
// an LMT or active-message packet) is read once into private memory,
// checked against the protocol's bounds, and only the copy is used. A
// value out of bounds fails the requests with that sender, with a
// *peerfault.Error naming it and the field; the other pairs go on. No
// buffer is sized by a total a sender announced: an unexpected message's
// grows as its cells arrive.
//
// The algorithm is model-checked: model/queue.pml (Promela, checked by
// `make test-model` with spin) has two and three producers, cells reused
// after the consumer hands them back, and asserts that nothing is lost or
// duplicated, that each producer's order holds, that nothing deadlocks, and
// (under weak fairness) that every message is eventually received.
//
// On amd64 the compiled queue operations (go tool objdump) are, without the
// Go prologue/epilogue and the offset bounds check, 6 instructions for an
// enqueue on an empty queue and 8 on a non-empty one (the paper: 6), and 10
// for a dequeue from a non-empty queue (the paper: 11); with them, 16, 26
// and 29. A whole 8-byte message, Isend to completed Irecv, costs about 800
// instructions through a fastbox and 930 through the queue (callgrind on
// BenchmarkSendRecvInstructions).
//
// # Fastboxes and sequence numbers (§3.2)
//
// A message that fits in a fastbox (Options.FastboxSize) goes there when the
// box is empty, skipping both queues; the flag and the first 32 payload bytes
// share a cache line. Because a sender may then have messages to the same
// receiver both in the queue and in a fastbox, every message carries a
// per-pair sequence number, and the number names the box: an ordered pair
// with a fastbox set (see below) has three boxes, taken in turn (message n
// uses box n mod 3). A sender whose
// previous messages still sit in their boxes (an LMT DONE, say, followed at
// once by the RTS of a reply) thus finds the next one free, where with a
// single box the message would take a cell through both queues: several
// cache misses more, a few times the fastbox's latency when the two CPUs
// sit far apart (docs/performance.md, nemesis). Every box also carries its sender's acknowledgment
// of what it has consumed, so that a box known empty is written without
// reading its flag, a line the other core wrote last; flags are set and
// cleared with release stores (internal/lineops), not sequentially
// consistent ones. A fastbox whose message is not the next expected one is
// left alone; a queue cell that is not the next expected one proves that
// its predecessors sit in the fastboxes (the sender filled them before
// enqueueing the cell), which are consumed first. Receivers poll the
// fastboxes of the sources their posted receives name at every Poll, and
// those of every peer with a set attached every 64 Polls.
//
// Each set also holds a line ring: 16 cache lines cut into 32 slots, for
// whole messages of up to 44 bytes (linebox.go). A message of up to 16
// bytes takes one slot, a longer one a whole line, so two of the smallest
// share a line. Only the sender writes a slot: each holds a stamp, its
// running number in the ring plus one, at the outer edge of its line, so
// the receiver never clears it and no payload lies where a stamp is read;
// the receiver publishes how many slots it consumed every 16 on a line of
// its own.
// A small message then moves at most one line from the sender's core to
// the receiver's instead of making a fastbox's line cross three times,
// which limits a stream of small sends, and a receiver behind a stream
// takes two messages a line, as Open MPI's vader packs its fastbox ring;
// line records take their numbers in the same sequence.
//
// A small send whose box is still full waits for it, when nothing queues
// behind it, for a bounded number of Polls before it takes cells (hold.go):
// a stream of blocking sends then leaves by the fastboxes at the rate the
// receiver empties them, instead of mostly by cells at about half that.
//
// # Memory and polling that grow with the job, not its square
//
// One fastbox set per ordered pair would cost N² space (72 MiB at 192
// ranks). Instead each rank owns a bounded pool of sets (fastbox.go): in a
// job of up to Options.Fastboxes+1 ranks every pair has its set from the
// start; in a larger one a sender sends its first 16 packets to a peer
// through cells, then claims a set from its own pool and announces it in a
// cell, in the pair's sequence, so both sides agree on it without a shared
// claim word (Open MPI's sm BTL sets up its fast boxes the same way, after
// the same 16 messages). Sets are never given back. The segment of a job
// of N ranks is then N × (Cells × CellSize + Fastboxes × (3 × FastboxSize
// + 17 lines)) plus a few lines per rank: 738 KiB per rank by default,
// 138 MiB at 192 ranks (SegmentSize). Rank 0 checks it against the free space of the
// segment's directory and reserves it with fallocate(2): a job that does
// not fit fails Join with a SpaceError (size needed, size free, the fix)
// instead of a SIGBUS on a later first touch.
//
// DefaultFastboxes is 32, Open MPI's own bound: a 3D stencil's 26
// neighbours fit, and the pool takes 226 KiB per rank, beside 512 KiB of
// cells. What fastboxes buy is latency (an 8-byte message skips both
// queues); what a set costs a receiver is one line to poll, every Poll
// while a receive names its sender, every 64 Polls otherwise.
// docs/performance.md, "Scaling nemesis to a whole node" has the measurements.
//
// Polling follows activity: a Poll visits the senders named by posted
// receives, the destinations with queued sends, and every 64 calls the
// attached sets, never the whole job. A wildcard receive polls the
// attached sets at every Poll while there are at most 8 of them; with more,
// it reads its bell, where a sender sets its bit after filling a fastbox
// when it finds the bit clear, and polls only the senders whose bits it
// took (with one SWAP). A rank with 191 peers of which 2 talk polls what a
// rank with 2 peers does (BenchmarkPollIdlePeers).
//
// # Endpoint
//
// An Endpoint gives the MPI point-to-point semantics the rest of knemesis
// needs: Send/Recv, Isend/Irecv with Test/Wait, tags, AnySource and AnyTag,
// Probe, and non-overtaking order per (source, tag). Receives match in the
// order they were posted, messages in the order they arrived; a message that
// arrives before its receive is copied out of its cell at once (into a
// recycled buffer) so that the sender's cells always come home, with one
// exception that costs the senders nothing: a Poll that has matched a
// posted receive and has none left posted stops there, and leaves what
// else has come (in the fastboxes and the queue) for the receives to
// come, so that a receiver taking a stream one receive at a time copies
// each message once, not into a buffer and out again. A receive
// buffer shorter than the message gets ErrTruncated, with the buffer filled
// and nothing written past it.
//
// Requests are caller-owned values (var r nemesis.Request), so Isend and
// Irecv allocate nothing. One Poll advances everything: queued sends, the
// fastboxes, the receive queue, the LMT. There is no progress goroutine and
// no lock: an Endpoint belongs to one goroutine. A blocked call polls, then,
// once SpinBeforeYield polls in a row (tens of microseconds, as long as a
// mid-sized copy takes) have moved nothing (no cell in or
// out, no LMT chunk), yields the CPU with sched_yield at every round, so a
// job with more processes than cores still runs, while a transfer in
// motion is never slowed by a yield per chunk. After 256 such yields it
// dozes: it sleeps in futex(2) on the word of its bell, and whoever hands
// it a cell or fills a fastbox to it wakes it (doze.go). A job of 192
// ranks on 2 cores, most of them blocked in a receive, thus leaves the
// cores to the ranks that work (TestJob192).
//
// Messages longer than one cell go as a series of cells, or, when an LMT is
// set (SetLMT), by rendezvous: the RTS travels in a cell, in sequence with
// the eager messages, and the LMT moves the payload (see LMT).
//
// # The shared arena
//
// With Options.ArenaSize, each rank owns a region of that many bytes at
// the end of the segment, from which Endpoint.Alloc hands out buffers and
// Endpoint.Free takes them back (arena.go; bad frees and exhaustion are
// refused with ErrDoubleFree, ErrForeignBuffer, ErrArenaFull). Every rank
// maps every region, so a message sent from arena buffers to a rank of
// this node, longer than a fastbox's payload, leaves as a descriptor
// (kindArena: the pieces' offsets in the sender's region, a completion
// slot), in the pair's sequence through the fastbox or a cell, and is
// matched like any message; its receiver checks every piece against the
// sender's region, copies it once, straight into the receive buffer, list
// or type, and releases the sender by a store into the slot, which the
// sender polls while it has such sends pending (arenasend.go: the
// window-based shared-memory transfer of §2.3, with its completion
// counter). No LMT, no rendezvous, no system call: what lmtbench's memcpy
// reference does, with MPI's matching around it. A message that fits a
// fastbox stays there (one short copy each side, and the sender completes
// without waiting for its receiver); one whose LMT claims it (LMTArena: a
// backend forced on it) goes to the LMT, whose arena backend makes the
// same copy behind an RTS and a DONE (package arena). Each rank has a page
// of slots, one line per pending send; a send that finds them all taken
// goes the way it would without the arena. A dead receiver fails the send
// with a *PeerError and frees its slot. The arena and the slots are
// reserved with the segment and go with it: Join's space check counts
// them, and nothing of them outlives the job.
//
// # The optimization window
//
// After Aumage, Brunet, Furmento and Namyst, "NewMadeleine: a Fast
// Communication Scheduling Engine for High Performance Networks" (CAC
// 2007): a send that cannot leave at once waits in its destination's
// window (the per-destination send queue), and a Strategy builds the next
// packets from the window when the channel frees (window.go).
// Straightforward, the default, sends each message alone. Aggregate also
// holds a small message whose fastbox is busy, and packs the small
// messages waiting in a window into one cell, each with its own sequence
// number, tag and length (aggregate.go): eight 8-byte sends cost one cell
// instead of eight, and the receiver matches them one by one as separate
// messages. Batch and Flush hold every send between them in the windows.
// A send that finds its channel free leaves as it always did: the window
// costs one flag test when it is empty.
//
// # Noncontiguous buffers
//
// Isendv, Irecvv, Sendv and Recvv take an iovec list ([][]byte) instead of
// one buffer: the message is the entries end to end, a receive holds the
// sum of its entries' lengths, zero-length entries may be anywhere and an
// empty list is a zero-length message. Either side may use a list whatever
// the other uses. A longer message fills every entry and ends with
// ErrTruncated, nothing written past any entry. The request keeps the
// caller's list (no allocation, no copy of it), so the list must stay put
// until the request completes. No packing: an eager message is gathered
// from the entries straight into the fastbox or cells and scattered from
// there into the receiver's entries, the one copy each side makes anyway
// (a message that arrived before its receive is scattered from the
// unexpected-message buffer, as a single-buffer receive copies from it). A
// message handed to the LMT takes the list along (Request.Iov), for the
// backend to move with its own iovec handling, such as process_vm_readv's.
// The single-buffer calls keep their direct copies, one flag test away.
//
// IsendType, IrecvType, SendType and RecvType take a base buffer and a
// derived datatype (package datatype: vector, indexed) instead: the
// message is the type's packed stream, its blocks' bytes in order, and
// either side may use a type, a buffer or a list whatever the other uses,
// as in MPI. A nil type or one whose extent passes its base is refused at
// once (ErrInvalidArg, wrapping the *datatype.FieldError that names the
// extent). An eager message is gathered from the blocks straight into the
// fastbox or cells and scattered from there into the receiver's blocks by
// a cursor, found again at each cell by position (O(log blocks)): no
// packing buffer, no allocation per message or per block, and small typed
// messages aggregate like any others. A longer message goes to the LMT
// as its description when the LMT takes datatypes (LMTDatatypes: package
// attach hands it to lmt.Engine's StartSendType and StartRecvType, which
// stage blocks under a page and move larger ones in place, after
// NewMadeleine's §5.3). The cells carry it instead with another LMT,
// when its encoding does not fit an RTS (an indexed type of a few
// thousand blocks), or when the LMT refuses it. A typed receive of a
// rendezvous needs such an LMT too (else ErrNotSupported); one from a
// plain buffer takes the sender's backend when it can: a CMA one pulls
// into the blocks in place, a stream one (the shm ring, the pipes) walks
// them through its channel. It moves to cma-write, in place, when its
// description fits a CTS, and stays on the stream backend when it does
// not: a description of any length receives. A longer message than the
// receive's type fills every
// block and ends with ErrTruncated; nothing outside the blocks is
// written. Typed messages go between ranks of one node (ErrNotSupported
// across Options.Net).
//
// # Ranks on other nodes (§2.2, §3.4-3.5)
//
// With Options.Net, only the ranks of this rank's node share its segment
// (named after the job and the node); the others are reached through a
// NetModule, the paper's network module (init, finalize, send, poll_send,
// poll_recv: see netmod.go). Its packets carry the cells' header fields and
// enter the same arrive and continueMsg, so matching, AnySource, Probe,
// truncation and per-pair order (checked by sequence number) are those of
// the shared-memory path. Poll polls the module only when something may
// come from it, and once per netIdlePoll otherwise. There is one
// rendezvous for long messages, the LMT's, whatever the path: a message
// past the eager limit to a remote rank is handed to the LMT like any
// other, its RTS sent through the module in the message's place in the
// pair's sequence, its CTS and DONE through the module too (netrdv.go);
// the LMT gives remote ranks its net-read backend alone (package
// netmod/netread), which moves the payload with the module's one-sided
// read (NetReader: Expose, Read; libfabric's fi_read), reached through
// ExposeNet and ReadNet so that Poll polls the module while reads are in
// flight. Without an LMT, or over a module that cannot read, long remote
// messages go in packets. A remote rank's failure, from
// the module or from a blocked call's liveness probes, fails what waits on
// it as a local rank's death does. Package netmod/ofinet (build tag ofi) is
// the libfabric module; nil Options.Net is the one-node endpoint.
//
// # Faults
//
// Every rank records its PID in the segment at Join (PeerPID exposes it for
// process_vm_readv). A blocked call checks every Options.LivenessInterval,
// with one poll(2) over pidfds, whether peers still live. When one is gone,
// what it sent before dying is still delivered; then sends to it, receives
// from it and (if it crashed rather than closed) wildcard receives fail
// with a *PeerError naming it.
//
// Cells left in a gone rank's receive queue are given back to their owners
// by one survivor, which claims that queue's consumer role in shared memory:
// a sender whose cells were all there would otherwise never send again.
//
// Two faults are not repaired. A rank that dies between the SWAP and the
// link of an enqueue leaves the receive queue cut after the last linked
// cell: later messages from live ranks behind it never arrive (their
// receives wait, wildcard ones fail because a rank crashed). And the cells
// a rank held when it died (dequeued, not yet returned) are lost to their
// owners, which keep sending with fewer.
//
// # Segment lifetime
//
// Rank 0 builds the segment under a private name and publishes it with
// link(2), so that the others never map a half-built segment. They wait for
// it (Options.JoinTimeout) and check its header: magic, layout version and
// geometry; a mismatch is ErrLayout naming both. The last rank to join
// unlinks the name: from then on the memory lives exactly as long as some
// rank maps it, so a job that crashes later leaves nothing behind. A segment
// left by a job that crashed while joining is recognized by its dead creator
// PID and replaced.
//
// # Choosing the cell size
//
// BenchmarkCellSize ping-pongs messages of 8 B to 256 KiB through cells of 2
// to 32 KiB (no LMT, so long messages are pipelined through cells). Cells
// of 2 and 4 KiB took about twice as long as 8 KiB ones for a 256 KiB
// message, and larger cells gained nothing; 8-byte latency did not depend
// on the cell size (docs/performance.md, nemesis, has the figures).
// DefaultCellSize is therefore 8 KiB, the smallest of the fast ones (64
// cells: 512 KiB per rank), as MPICH found.
package nemesis
