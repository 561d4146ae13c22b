// Package shm is the "shm" LMT backend, the Nemesis default: a ring of K
// slots in a shared mapping per ordered pair of ranks. The sender copies
// the next slot's worth of its buffer into a free slot and bumps
// "written"; the receiver copies a filled slot out and bumps "read". With
// K ≥ 2 the two copies overlap, each CPU copying while the other does.
// Importing the package registers the backend with package lmt:
//
//	import _ "github.com/knemesis/knemesis/shm"
//
// MPICH has 8 × 32 KiB; this ring has 16: the slots stay 32 KiB, so a
// 64 KiB message still fills two and the two copies overlap, and the ring
// holds twice as much, which lets a sender that is ahead keep copying
// while the receiver catches up (what that gained, and where it did not:
// docs/performance.md). The price is memory: 512 KiB per ordered pair of
// ranks that exchange large messages through shm (lmt.Config.ShmSlots
// lowers it). The ring is mapped from /dev/shm on first use, and its name
// removed as soon as both sides have it mapped, so that a crash leaves
// nothing behind.
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
// counters say. A ring whose first transfer fails before both sides mapped
// it (the receiver died before its CTS) is unlinked at once.
package shm
