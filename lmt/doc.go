// Package lmt moves large messages between the processes of a job: the
// Large Message Transfer layer of MPICH2-Nemesis (Buntinas, Goglin,
// Goodell, Mercier, Moreaud, "Cache-Efficient, Intranode, Large-Message
// MPI Communication with MPICH2-Nemesis", ICPP 2009). It is the rendezvous
// core: RTS, CTS and DONE over a control channel, the payload through a
// backend. docs/design/lmt.md tells how and why it is built so.
//
// # Backends
//
// [Identities] declares every backend once: its name, wire id, [Flow],
// copies and home package. The core imports no backend; a backend package
// implements [Backend] (and the optional interfaces that fit it) and calls
// [Register] from its init, so importing it makes it available:
//
//	import _ "github.com/knemesis/knemesis/cma"
//
// [Check] says whether a backend works here with a peer, or returns an
// [*Unavailable] with the reason and the fix. An Engine tries the
// backends of Config.Prefer in order and falls back along it; the
// receiver may answer with a fallback of its own. Remote backends
// (net-read) serve the ranks Config.Remote names, and only those.
//
// # What an Engine promises
//
// An [Engine] runs the transfers of one process and is driven by one
// goroutine. Nothing blocks: [Engine.Progress] moves at most one chunk
// per transfer ([Config].Chunk, or the backend's own as a [Chunker]) and
// returns, so the caller's poll loop keeps delivering small messages.
// The caller carries the RTS with its match information ([Engine.StartSend],
// [Engine.StartRecv]) and hands the engine the control packets that
// arrive ([Engine.HandleControl]); [Control] carries the engine's own, in
// order per peer.
//
// A sender's buffers are not reused before the data is out of them: the
// receiver's DONE completes both sides, except for a [Buffered] channel
// (the shm ring, the pipe) or a [Copier] (arena-copy), whose sender
// completes once the channel or its copy holds the message;
// [Engine.Drain] waits for those before a process exits.
// In steady state a message allocates nothing: [Engine.Release] hands a
// completed transfer back for reuse. Each [Transfer] keeps [Stats]: bytes,
// chunks, system calls, the backend and, for a split message, what each
// rail moved.
//
// A message described by a datatype goes through [Engine.StartSendType]
// and [Engine.StartRecvType] on the backends that are [Datatyped]; any
// send matches any receive.
//
// # Faults
//
// A peer that dies fails every transfer with it ([PeerError]) once the
// driver says so ([Engine.PeerFailed]); the engine keeps no watch of its
// own. Everything another process wrote (packet fields, handles, shared
// counters) is checked before it drives a copy, a loop or an index: a bad
// value fails the transfer with a [*CorruptError] naming the rank and the
// field ([ErrCorrupt] matches them all). A failed receive completes only
// once no copy into its buffers is in flight ([Quiescer]).
package lmt
