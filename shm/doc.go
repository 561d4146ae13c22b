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
package shm
