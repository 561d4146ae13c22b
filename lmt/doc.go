// Package lmt moves large messages between the processes of a knemesis job:
// the Large Message Transfer layer of MPICH2-Nemesis (seed 003, §2-3).
//
// A large message is not copied through the small-message queues. Instead
// the two endpoints run a rendezvous over a control channel (the Nemesis
// queues in a real job) and the payload goes through a backend:
//
//	shm        pipelined copy through a shared ring of K slots (two copies)
//	cma        receiver pulls with process_vm_readv (one copy)
//	cma-write  sender pushes with process_vm_writev after the CTS (one copy)
//	cma-split  receiver reads the first half, sender writes the second, at
//	           once (one copy, two CPUs)
//	pipe       writev into a pipe, readv out of it (two copies, package pipe)
//	vmsplice   sender pages spliced into a pipe, readv (one copy, package vmsplice)
//
// # Protocol
//
// The sender calls [Engine.StartSend], which writes a ready-to-send packet
// (RTS) holding the message length and, for one-sided pull backends, the
// handle the receiver needs (a process id and an address list for CMA, a
// cookie for KNEM). The RTS travels with the match information of the
// message; when it matches a receive, the receiver calls [Engine.StartRecv].
// What follows depends on the backend's [Flow]:
//
//	Pull    receiver copies (Step by Step), then sends DONE
//	Stream  receiver sends CTS; both sides Step, one moving data in, the other
//	        out (pipe, vmsplice, shm); the receiver sends DONE
//	Push    receiver sends CTS with its own handle; the sender copies and
//	        sends DONE
//	Split   RTS and CTS each carry a handle; the receiver copies the first
//	        half while the sender copies the second; each side sends DONE
//	        when its half is in and completes when it has the other's
//
// DONE completes both sides: the sender never reuses its buffer before the
// receiver said the data is out of it, which vmsplice (pages referenced, not
// copied) and CMA require. A channel that holds a copy is the exception
// ([Buffered]: the shm ring, the pipe): its sender completes once its last
// byte is in and the CTS has committed the receiver to it, as MPICH
// completes its shm LMT sends, and the DONE that follows only brings the
// receiver's time to the selector. A streaming sender then runs ahead of
// its receiver by what the channel holds; lmt/attach's Close waits for
// such sends to be taken, so a rank may close and exit right after one.
// The receiver has the last word on the backend: a
// receiver that cannot use the one chosen by the sender (CMA across user
// namespaces is one-way) answers with a CTS naming a fallback.
//
// A Stream backend that tags each piece of its channel with its transfer
// (the shm ring, see [Early]) lets the sender start filling as soon as the
// RTS is out, instead of a round trip later: a 64 KiB message then waits in
// the ring when the receiver matches it. If the receiver matches a later
// message first, it skips the early pieces and the sender starts that
// message over after its CTS; [Stats].Early says what was kept. One message
// per peer fills early at a time, the oldest waiting for its CTS: each CTS
// passes the right to the next, which fills the ring behind it.
//
// A Stream backend whose channel is a plain FIFO (the pipes, see [Ordered])
// cannot tell one message's bytes from another's, so nothing goes in before
// its CTS; instead the receiver sends the CTS of every message it has
// matched at once, and senders push them in CTS order, so that the pipe
// does not run dry while a CTS crosses. The receive behind one that
// completes reads from the next Progress, not the same one: its bytes are
// in the pipe already, and returning first lets the application post its
// next receive, whose CTS keeps the sender writing while this side reads.
// A transfer queued behind one that failed fails too rather than read its
// leftovers.
//
// # Progress
//
// Nothing blocks. [Engine.Progress] moves at most one chunk per transfer
// and returns, so that the caller's poll loop keeps delivering small
// messages while a gigabyte moves — the responsiveness argument of the
// paper for 64 KiB vmsplice chunks. A chunk is 64 KiB for the shm ring
// ([Config].Chunk), a pipe-full for the pipes, and 4 MiB for CMA
// ([Config].CMAChunk), whose every call costs as much again as copying
// 64 KiB; a backend asks for its own as a [Chunker].
//
// # What a message costs
//
// Beside the copy, a message pays its rendezvous: building the RTS,
// matching it, starting the receive, the CTS for push and split flows, the
// DONE, and completing both requests. Timestamped on both ranks of a 64 KiB
// cma-split ping-pong on a 2-vCPU VM whose two vCPUs shared a core (Go
// 1.26, medians of 30000 messages), this is 0.9 µs a message: the sender's
// Isend to its RTS in the fastbox 0.18 µs, the receiver's sight of it and
// its match 0.11, StartRecv to the CTS 0.13, the sender's sight of the CTS
// to its system call 0.09, its DONE after the copy 0.06, the receiver's
// sight of that DONE 0.12, and the completion back to the caller 0.13. The
// C reference, which exchanges bare flags and matches nothing, spends some
// 0.24 µs beside the same system calls, and its 32 KiB process_vm_writev
// takes 3.84 µs where Go's takes 3.95-3.98. The engine's own instructions
// are the smaller part: BenchmarkProtocol, which runs both engines of an
// empty message in one process with a control channel that costs nothing,
// takes 0.25 µs for cma and 0.35 µs for cma-split, both sides together;
// the rest is the fastbox crossings and the time each side takes to see a
// packet and act on it. At 64 KiB, where the copy itself takes 4-7 µs,
// the CMA backends nonetheless reached 0.99-1.03 of the C rate in far
// medians of a later session (ping-pong and stream); from 1 MiB, 0.95-1.2
// (measure it yourself with `go test -bench LMT ./lmt/internal/rawbench`).
//
// # Using it
//
// Inside a job, package lmt/attach installs an Engine as the LMT of a Nemesis
// endpoint: Send and Recv above the eager limit then use it. Standalone, an
// Engine needs a [Control] that carries its packets in order, and the caller
// carries the RTS (see lmttest for a socket-based harness). Each [Transfer]
// keeps [Stats]: bytes, chunks, system calls and the backend that carried it.
// A caller done with a completed Transfer hands it back with
// [Engine.Release]; the next StartSend or StartRecv reuses it with its packet
// buffer, so that in steady state a large message allocates nothing
// (lmt/attach releases a request's transfer when the request is reused).
//
// # Writing a backend
//
// A backend implements [Backend] and registers a [Factory] under a wire id
// (shm 1, cma 2, cma-write 3, pipe 4, vmsplice 5, cma-split 7; 6 is kept for the KNEM
// module's backend, which fits the Pull flow: its cookie is the handle, Step
// submits the copy and reports bytes once the status word says so).
//
// # Availability
//
// [Check] tells whether a backend works here with a given peer and, when it
// does not, returns an [*Unavailable] error with the reason and the fix
// (ptrace restrictions, user namespaces, non-dumpable peers, pipe size caps).
// An Engine falls back along its preference list.
package lmt
