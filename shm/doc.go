// Package shm is the "shm" LMT backend, the Nemesis default: a ring of K
// entries in a shared mapping per ordered pair of ranks, each entry naming
// a slot of S bytes. The sender copies the next slot's worth of its buffer
// into a free slot and bumps "written"; the receiver copies a filled slot
// out and bumps "read". With K ≥ 2 the two copies overlap, each CPU copying
// while the other does. Importing the package registers the backend with
// package lmt:
//
//	import _ "github.com/knemesis/knemesis/shm"
//
// # Memory: a pool per rank, not a ring of slots per pair
//
// MPICH's ring holds its slots itself (8 × 32 KiB per pair). At K = 16
// that is 512 KiB per ordered pair, and an all-to-all of 192 ranks maps
// 18 GiB. Here the slots come from a pool each rank owns (P slots,
// lmt.Config.ShmPoolSlots, default 64 × 32 KiB = 2 MiB per rank whatever
// its number of peers): the sender claims a slot from its pool, fills it,
// and names it in the pair's ring; the receiver copies it out; the sender
// releases it once the receiver's counter has passed it. A ring is then
// one page of counters and entries (4 KiB per ordered pair that uses it),
// and the slots cost P × S per rank. A pair still has K slots in flight
// when the pool has them free, so a pair alone in its job runs as the
// fixed ring did; P = 4K lets four pairs per sender stream at full depth
// before they share (docs/performance.md says how to measure the choice).
//
// The pool is a sealed memfd allocated when the Engine is created (a
// shortage fails the job's Join, not a copy with SIGBUS), not a /dev/shm
// file: it has no name to leave behind however a rank dies, and does not
// count against a container's small /dev/shm. A receiver finds it among
// /proc/<pid>/fd by its name (job and rank), checks its seals and size,
// and maps it read-only, when it first opens a ring from that sender and
// before its CTS; it tells the sender its verdict in the ring. Where it
// cannot (the sender's pid names another process in
// this PID namespace, another user namespace, a non-dumpable sender) the
// pair uses the ring's own K slots, MPICH's fixed ring: they are holes in
// the ring file, costing memory only in pairs that use them (ring.go).
//
// Only the sender claims and releases its slots, from its private record
// of what it put in each ring, so a receiver that dies or scribbles cannot
// free a slot in use. An empty pool is "not now": the sender waits for its
// receivers to read. Filling early (before the CTS, [lmt.Early]) takes at
// most half the pool: pieces of a message the receiver has not matched
// stay claimed, and the match may wait on messages this rank has yet to
// send, which need slots. A receiver found dead fails its transfers, and
// their failure (Abort) gives back every slot its ring held.
//
// The counters run on across transfers; slot i of a transfer holds bytes
// [i·S, (i+1)·S) of it, so both sides know every slot's length from the
// transfer's length, which the CTS fixed.
//
// Every filled slot carries the sender's id of its transfer. That lets the
// sender start filling as soon as its RTS is out ([lmt.Early]): if the
// receiver matches a later message first, it skips the slots of the earlier
// one and records its id in "revoked", and the earlier one starts over
// after its own CTS. It also lets a receiver skip what a truncated message
// left behind. The ring holds a copy, so a send completes once its last
// byte is in ([lmt.Buffered]).
//
// The peer's counter is read from a mapping it can write, so it is checked
// on every read: written - read must lie in [0, slots]. Each side keeps its
// own counter privately and only publishes it. A counter out of bounds
// fails the transfer with an [lmt.CorruptError] naming the peer, instead
// of walking 2^64 slots or waiting for room for ever, and the ring is not
// used again; a Step looks at no more than the ring's slots whatever the
// counters say. A slot number is checked against the pool's size, and a
// piece in a pool the receiver said it cannot map fails the same way. A
// ring whose first transfer fails before both sides mapped
// it (the receiver died before its CTS) is unlinked at once.
//
// The backend is also the third rail of multirail-shm (lmt.RingRail, an
// lmt.Ringer): each ordered pair that moves such messages has a second
// ring, the rail's, through which the sender copies one piece of a Split
// message while the receiver copies it out, with the same slots, counters
// and checks (rail.go).
package shm
