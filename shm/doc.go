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
// The slots come from a pool each rank owns (lmt.Config.ShmPoolSlots
// slots of lmt.Config.ShmSlotSize bytes, 2 MiB by default, whatever its
// number of peers), a sealed memfd allocated when the Engine is created:
// a shortage fails the job's Join rather than a copy, and no name is left
// behind however a rank dies. Receivers get it from the sender over a
// socket in the job's directory (internal/fdpass), checked sealed before
// it is mapped. A ring is one page per ordered pair that uses it.
// docs/design/shm.md tells why.
package shm
