// Package lmt moves large messages between the processes of a knemesis job:
// the Large Message Transfer layer of MPICH2-Nemesis (Buntinas, Goglin,
// Goodell, Mercier, Moreaud, "Cache-Efficient, Intranode, Large-Message MPI
// Communication with MPICH2-Nemesis", ICPP 2009, §2-3).
//
// A large message is not copied through the small-message queues. Instead
// the two endpoints run a rendezvous over a control channel (the Nemesis
// queues in a real job) and the payload goes through a backend. This
// package is the rendezvous core; the backends live in packages of their
// own and register with it when imported:
//
//	shm        pipelined copy through a shared ring (two copies)       package shm
//	cma        receiver pulls with process_vm_readv (one copy)         package cma
//	cma-write  sender pushes with process_vm_writev after the CTS      package cma
//	cma-split  receiver reads the first half, sender writes the second package cma
//	multirail  cma-split cut by each rail's measured speed             package cma
//	multirail-knem
//	           multirail with the knem module's kernel copy as a third package cma, the
//	           rail, where /dev/knem works                             knem rail in knemlmt
//	multirail-shm
//	           multirail with the pair's shm ring as a third rail,     package cma, the
//	           filled by the sender while the receiver empties it      ring rail in shm
//	pipe       writev into a pipe, readv out of it (two copies)        package pipe
//	vmsplice   sender pages spliced into a pipe, readv (one copy)      package vmsplice
//	knem       the KNEM-ABI module copies, or offloads to DMA          package kmod/knem/knemlmt
//	arena      receiver copies from the sender's shared-arena buffer   package arena
//	arena-copy sender copies into an arena slot, receiver out of it    package arena
//	net-read   receiver reads the sender's registered buffer over the
//	           network (fi_read); ranks on other nodes only            package netmod/netread
//
// The same rendezvous carries long messages to ranks on other nodes:
// Config.Remote tells the engine which ranks those are, and it gives them
// the Remote backends (net-read) and nothing else, and gives those to no
// rank of its own node, refusing either with an *Unavailable that says so
// (Engine.Check). The RTS and the control packets reach a remote rank
// through the Control channel as any others do (the nemesis endpoint
// sends them through its network module). A remote peer that is lost
// fails its transfers with a PeerError naming it, as a local one that
// dies does; net-read's Release ends the sender's registrations however
// the transfer ends. A read still in flight when a receive fails (its
// sender lost, a read failed, Close) may still write into the receive
// buffer: the receive completes for its user only once net-read, a
// [Quiescer], says none is in flight any more.
//
// [Identities] declares each one's name, wire id and flow once; the
// selector (package threshold) and lmtbench derive their lists from it.
// The core imports no backend and nothing of nemesis: the packages that
// wire an endpoint, the engine and a selector together (attach, auto, and
// the root package's Join) sit above it.
//
// # What an Engine promises
//
// An [Engine] runs the transfers of one process, driven by one goroutine.
// Nothing blocks: [Engine.Progress] moves at most one chunk per transfer
// and returns, so that the caller's poll loop keeps delivering small
// messages while a gigabyte moves — the paper's responsiveness argument
// for 64 KiB vmsplice chunks. A chunk is [Config].Chunk (64 KiB) for the
// shm ring, a pipe-full for the pipes, [Config].CMAChunk (4 MiB) for CMA,
// whose every call costs a system call and pinning; a backend asks for
// its own as a [Chunker].
//
// A sender's buffers are not reused before the data is out of them:
// DONE completes both sides, which vmsplice (pages referenced, not copied)
// and CMA require. A channel that holds a copy is the exception
// ([Buffered]: the shm ring, the pipe): its sender completes once its last
// byte is in and the CTS has committed the receiver to it, as MPICH
// completes its shm LMT sends; the DONE that follows only brings the
// receiver's time to the selector, and [Engine.Drain] waits for such sends
// before a process exits. A Pull backend that copies the message into
// memory of its own in Handle ([Copier]: arena-copy) completes its sender
// the same way, at the first Progress, and gets its copy back when the
// DONE comes. The receiver has the last word on the backend:
// one that cannot use the sender's choice (CMA across user namespaces is
// one-way) answers with a CTS naming a fallback. A peer that dies fails
// every transfer with it ([PeerError]) once the one who drives the engine
// and watches the job says so ([Engine.PeerFailed]: the Nemesis endpoint's
// pidfd watch, in a job); the engine keeps no watch of its own.
// In steady state a message allocates nothing: a caller hands completed
// transfers back with [Engine.Release] and the next one reuses them.
//
// # How it is built
//
// The rendezvous core is small and knows no backend: the packet codec
// (packet.go), the id table that packets name transfers by (table.go), the
// outbox of packets that found no room (outbox.go), the pool of released
// transfers (pool.go), Progress (progress.go), peer liveness (liveness.go),
// and the entry points StartSend, StartRecv and HandleControl
// (rendezvous.go). Those entry points decide a transfer's flow once, when
// its backend is chosen, and then call it; they never branch on the flow,
// the side or the state themselves. Each [Flow] has a file that tells its
// whole protocol on both sides:
//
//	flow_pull.go    Pull    RTS carries the sender's handle; the receiver
//	                        copies, then sends DONE (cma, knem)
//	flow_push.go    Push    CTS carries the receiver's handle; the sender
//	                        copies, then sends DONE (cma-write)
//	flow_split.go   Split   both handles travel, the CTS with the cut; each
//	                        side copies its pieces and sends DONE when they
//	                        are in (cma-split, multirail, multirail-knem,
//	                        multirail-shm)
//	flow_stream.go  Stream  both sides Step a shared channel, one in, one
//	                        out; the receiver sends DONE (shm, pipe, vmsplice)
//
// Messages that share a stream channel are scheduled by the channel of
// their (backend, peer) pair (channel.go): the receiver reads one message
// at a time, in match order; one sender at a time may fill a tagging
// channel ([Early]: the shm ring) before its CTS, a round trip early;
// on a plain FIFO ([Ordered]: a pipe) the receiver grants every matched
// message at once and senders push in the order of those CTSs, so that
// the pipe never runs dry while a CTS crosses. A transfer keeps no flags
// for this: whether it may fill, has pieces in, or is pushing is read from
// its channel and its state.
//
// # One message, end to end
//
// Take a 1 MiB message on shm, a Stream backend. Read flow_stream.go and
// channel.go alongside:
//
//  1. The sender's StartSend picks the backend, and stream.sendRTS puts the
//     transfer on its channel, waiting for its CTS; channel.enlist may give
//     it the right to fill early. The caller carries the RTS to the peer
//     with the message's match information.
//  2. Until the CTS, Progress calls channel.fill: the first slots of the
//     ring fill while the RTS crosses.
//  3. The receiver matches the RTS and calls StartRecv; stream.matched
//     calls channel.claim, which grants the channel (Start, CTS) or queues
//     the message behind the one the receiver is reading.
//  4. The CTS reaches the sender's HandleControl; stream.cts calls
//     channel.commit, which keeps the early slots if the receiver kept
//     them (else starts over) and lets the sender push.
//  5. Both sides' Progress calls Step: the backend copies a chunk into the
//     ring on one side and out on the other.
//  6. The sender's last byte is in: stream.moved completes it for its user
//     at once (the ring holds a copy) and channel.pushed lets the next
//     sender push. The receiver's last byte is out: stream.moved sends DONE
//     with its time and completes; channel.leaveReceiver grants the
//     channel to the next message.
//  7. The DONE reaches the sender, whose transfer leaves the engine with
//     the receiver's time for the selector (Config.OnMeasured).
//
// A Pull message (cma) is shorter: flow_pull.go alone tells it.
//
// # Rails
//
// A Split message moves over several rails at once: the receiver reads
// its piece out of the sender's memory, the sender writes the last piece
// into the receiver's, so that two CPUs copy (the multi-rail split of
// NewMadeleine: Aumage, Brunet, Furmento, Namyst, "NewMadeleine: a Fast
// Communication Scheduling Engine for High Performance Networks", CAC
// 2007). multirail-knem adds a rail of another kind where the knem module
// works: the sender declares its buffers to knem before the RTS, which
// carries the cookie ahead of the CMA handle, and the receiver has the
// module copy a third piece asynchronously, on its kernel thread or a DMA
// channel, while it reads its own (an [Offloader]; rails_offload.go).
// multirail-shm adds the pair's shm ring as a rail: the sender fills the
// ring with one more piece, a slot at a time, while the receiver empties
// it, both between the chunks of their CMA pieces (a [Ringer];
// rails_ring.go); the ring, apart from the stream's, carries one
// message's piece at a time. The receiver cuts, since it alone knows how
// much it accepts and which rails it can drive, and its CTS carries the
// cut as the boundaries between the pieces (read, knem, write, ring, in that order), which the sender checks
// against the length and the rails it offered. cma-split cuts in halves;
// multirail, multirail-knem and multirail-shm ([Weighed]) cut by the speed
// the receiver's engine measured of each rail with that peer — its read
// piece's time from the match, the knem copy's from its start to the poll
// that saw it end, the ring's until it emptied the last slot, the
// sender's write piece's from the CTS, carried in its DONE beside the
// piece's bytes — seeded with equal shares and averaged over recent
// messages, so that the pieces finish together. No rail gets less than a
// sixteenth, so that a rail measured slow once is measured again.
// [Stats].Rails says what each rail moved. A rail that fails fails its
// side, whose DONE fails the other at once; CMA pins the peer's pages
// only for the length of each call; a receiver whose knem copy still runs
// when its transfer fails completes only once the copy is over (the
// kernel writes into its buffers until then), and the sender withdraws
// its region however its transfer ends, so nothing stays pinned; a
// failed message that held the ring gives it up for that pair, its
// sender taking back its slots, and its file leaves /dev/shm. rails.go
// holds the cut and the measure, rails_offload.go and rails_ring.go the
// third rails, flow_split.go the protocol.
//
// # Using it
//
// Inside a job, package attach installs an Engine as the LMT of a Nemesis
// endpoint: Send and Recv above the eager limit then use it, and
// Endpoint.Wait sleeps on the pipes transfers wait for. Standalone, an
// Engine needs a [Control] that carries its packets in order, and the caller
// carries the RTS (see lmttest for a socket-based harness). Each [Transfer]
// keeps [Stats]: bytes, chunks, system calls and the backend that carried it.
//
// A message described by a datatype (package datatype: a vector or an
// indexed type over one base buffer) goes through [Engine.StartSendType]
// and [Engine.StartRecvType] on the backends that implement [Datatyped].
// On the CMA ones the handle carries the description's compact encoding
// instead of one entry per block, the large blocks move in place, and
// only the blocks shorter than [Config].SmallBlock are packed, each side
// into a staging buffer of its own, so that a run of them costs the
// kernel one iovec entry (NewMadeleine's small-block aggregation: see
// [Datatyped]). The stream ones walk each side's description into and
// out of their channel and ship none: a typed transfer takes them when
// no CMA backend can, a description too long for the packet that would
// carry it among the reasons, so that any send matches any receive.
//
// # Writing a backend
//
// A backend implements [Backend] (and the optional [Early], [Buffered],
// [Ordered], [Chunker], [Blocker], [Datatyped], [Walker],
// [TypedReceiver], [Releaser], [Quiescer] where they fit), gets an entry
// in [Identities] — its name, a wire id, its flow — and calls [Register]
// with that name from its package's init. The knem backend shows the Pull shape
// of a one-sided mechanism: its cookie is the handle, Step submits the copy
// and reports bytes once the status word says so.
//
// # What a peer writes is not trusted
//
// As in nemesis, everything another process wrote is checked before it
// drives a copy, a loop or an index: every field of a control packet
// (type, reserved byte, status, payload length, a negative length, a DONE
// claiming more than the message or a negative time), every field of a
// handle (the segment handle's pid, count, length and 64-bit total, the
// pid against the one the job knows; a typed handle's datatype encoding,
// decoded by package datatype with every field bounded, its size
// against the length to move, its small-block threshold (not negative)
// and its staging buffer (within the address space); knem's cookie and
// length), and the
// shm ring's counters in shared memory on every read. A bad value fails
// the transfer, or the packet, with a [*CorruptError] naming the rank that
// wrote it and the field ([ErrCorrupt] matches them all); the checks are
// comparisons on the paths a good message takes, and allocate only when
// they fail.
//
// # Availability
//
// [Check] tells whether a backend works here with a given peer and, when it
// does not, returns an [*Unavailable] error with the reason and the fix
// (ptrace restrictions, user namespaces, non-dumpable peers, pipe size caps).
// An Engine falls back along its preference list.
//
// Measured costs of these choices are in docs/performance.md, with the
// machine and the command behind each figure.
package lmt
