// Package rma gives the processes of a knemesis job one-sided
// communication: windows of memory that other ranks put to, get from and
// update atomically, and RWAPI's remote write with notification (Ben
// Fredj and Renault, 2006). docs/design/rma.md tells how it is built.
//
// # Windows
//
// A window is created collectively by every rank of a nemesis endpoint's
// job, in the same order everywhere; each rank holds a part of it,
// addressed by byte offsets from 0. [Allocate] gives each part new memory
// in one shared mapping, which leaves nothing in /dev/shm however the job
// ends. [Expose] makes memory the caller already has a part; each other
// rank reaches it by the first mechanism both can use, in the order of
// Options.Prefer ([Mechanisms]: an attached knem region, knem copies, CMA,
// active messages). [Window.Route] says, per target, the mechanism chosen
// and the LMT's *lmt.Unavailable for each one refused. [Window.Free]
// releases a window, collectively; it is refused with ErrInFlight while
// the caller's operations on it are incomplete.
//
// # Operations and completion
//
// Put, Get, PutV, GetV, PutNotify, FetchAdd and CompareSwap take an [Op]
// the caller owns, and allocate nothing. An access outside the target's
// part returns a *[RangeError] at once and writes nothing. An Op is
// complete when Test or Wait says so: a put's bytes are then in the
// target's memory, a get's in the caller's buffer, an atomic applied with
// Value holding the previous word. An operation whose target died fails
// with a *[TargetError] naming the rank.
//
// Flush(target) completes every operation toward target and checks that
// it lives; Fence completes every operation and waits for every rank to
// do the same. Operations from one rank to one target take effect in the
// order they were started. Operations from different ranks on the same
// bytes are not ordered, except atomics (64-bit words at 8-byte aligned
// offsets), which are atomic with respect to each other and to the
// target's own sync/atomic operations on the word.
//
// # Visibility and notifications
//
// A target sees a put's bytes once it has synchronized with the put's
// completion: a Fence, a notification, or a message sent after the put
// completed. PutNotify writes the data, then notifies; the target takes
// notifications with Notification or WaitNotification, in the order each
// initiator made them, and sees every byte of the put from then on. An
// initiator that dies holding a slot of a target's notification ring
// fails the target's waits behind it with a *TargetError naming it.
//
// # Progress
//
// A window belongs to one goroutine and has no progress thread: the
// endpoint's Poll (every blocking call of nemesis and of this package)
// runs the active messages other ranks sent and advances this rank's
// operations, so a target reached by active messages must poll now and
// then. The package installs itself as the endpoint's nemesis.AMHandler at
// the first window.
package rma
