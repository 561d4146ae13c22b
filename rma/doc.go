// Package rma gives the processes of a knemesis job one-sided
// communication: windows of memory that other ranks put to, get from and
// update atomically, and the remote write with notification of RWAPI.
//
// It follows two of the project's design sources: the RMA windows of
// Buntinas, Mercier and Gropp, "Design and Evaluation of Nemesis" (CCGRID
// 2006, §2.3), which an initiator addresses by the target's offsets and
// reaches through shared memory or, where the network needs it, a
// registration key, and the Remote-Write API of Ben Fredj and Renault,
// "The Critical's Path of Communication Model Analysis for a Performant
// Implementation of High-speed Interfaces over the Myrinet Interconnect"
// (2006), where a process writes straight into another's memory and the
// target learns of it by a notification.
//
// # Windows
//
// A window is created collectively by every rank of a nemesis endpoint's
// job, in the same order everywhere; each rank holds a part of it (of its
// own size, possibly empty), addressed by byte offsets from 0.
//
//   - Allocate gives each part new memory, all parts in one shared mapping
//     of a file made for that window alone; the file is unlinked as soon as
//     every rank has mapped it, so nothing stays in /dev/shm however the
//     job ends. Put and get are one user-space copy (internal/memcopy),
//     atomics are CPU atomics on the mapping.
//   - Expose makes memory the caller already has a part. Each other rank
//     reaches it by the first mechanism both can use, in the order of
//     Options.Prefer: the target's persistent knem region mapped into
//     this rank once, at Expose, where the module has region attach
//     (KnemAttach: put and get are one user-space copy with no system
//     call, atomics CPU atomics; the attachments are the window's
//     registration cache, released by Free), the same region reached
//     by one INLINE_COPY per operation (Knem: cookie and offset; one
//     kernel copy, run from 256 KiB on by the driver's thread and
//     completed through its status array, polled by the progress
//     loop), CMA (process_vm_writev/readv on the target's pid and
//     addresses, 4 MiB a call; one kernel copy), or active messages that
//     the target executes from its progress loop (the Nemesis queues; no
//     privilege needed, two copies more, and progress only while the
//     target polls). Whether knem and CMA are usable is decided by the
//     availability checks of the LMT, and Window.Route gives, per target,
//     the mechanism chosen and the LMT's own *lmt.Unavailable for each
//     one refused (Yama ptrace_scope, another user or PID namespace,
//     seccomp, module not loaded, module without region attach). Atomics
//     on an exposed window go to the target, which runs them on its CPU,
//     except through an attached region, where they are CPU atomics here.
//
// Free releases a window, collectively; it is refused with ErrInFlight
// while operations the caller started on it have not completed.
//
// # Operations and completion
//
// Put, Get, their list forms PutV and GetV, PutNotify, FetchAdd and
// CompareSwap take an Op the caller owns, so that they allocate nothing.
// They check their arguments at once: an access outside the target's part
// returns a *RangeError naming offset, length and the part's size, and
// nothing is written. Everything else completes the Op.
//
// An Op is complete when Test or Wait says so, and then the operation has
// taken effect at the target, whatever the mechanism: a put's bytes are in
// the target's memory (the caller may reuse its buffer), a get's are in
// the caller's buffer, an atomic has been applied and Value holds the
// word's previous value. Allocated windows, attached regions, CMA and
// knem complete a put or get inside the call or the next polls (a CMA
// transfer moves 4 MiB per poll, a large knem copy completes when its
// status slot says so); active messages complete when the target has
// answered. An operation whose target has died fails with a *TargetError
// naming the rank.
//
// Flush(target) waits until every operation the caller started toward
// target has completed, then checks that the target still lives (shared
// memory, CMA and knem would not notice otherwise). Fence completes every
// operation the caller started, then waits until every rank has done the
// same: after it, every part holds what the puts before the fence wrote.
//
// Operations from one rank to one target take effect in the order they
// were started, whatever their kind. Operations from different ranks on
// the same bytes are not ordered, except atomics, which are atomic with
// respect to each other and to the target's own sync/atomic operations on
// the word (64-bit words at 8-byte aligned offsets only).
//
// # Memory model and notifications
//
// A target sees a put's bytes in its own part once it has synchronized
// with the put's completion: through a Fence, a Notification, or a message
// the initiator sent after the put completed. Without one of these, reading
// bytes a put is writing gives any mix of old and new values.
//
// PutNotify(target, off, tag, buf) is a put followed by a notification
// with tag. The data is written first, by whichever mechanism, and only
// then is the notification sent; the target takes it with Notification or
// WaitNotification, and every byte of the put is visible in its part from
// then on. Notifications from one initiator arrive in the order of their
// PutNotify calls. A target that takes no notifications keeps them
// queued.
//
// On an exposed window the notification is an active message, in the same
// per-pair order as every other Nemesis packet. On an allocated window the
// initiator writes it straight into the target's memory, as RWAPI's writer
// does: each rank has a ring of notification slots in the window's
// mapping (one ring per target, not per pair, so the mapping grows
// linearly with the job), every other rank takes the ring's next
// position with a compare-and-swap, writes the put's data and the record,
// and publishes it with a release store; the target reads its ring
// without going through the endpoint, and polls the endpoint only between
// looks while it waits. A notification taken out of order (by source or tag) leaves the
// others queued in order. When the ring is full the PutNotify stays in
// flight, the operations started after it toward the same target behind
// it, until the target takes notifications or polls (every poll sets
// aside what the ring holds). No packet carries the notification, so the
// initiator wakes the target if it dozes in a blocked call
// (nemesis.Endpoint.Wake), as a packet would.
//
// An initiator that dies holding a position of a target's ring (between
// taking it and publishing it) leaves a slot that names no one, and that
// the target cannot skip, since its holder may be a live rank, only slow:
// once it has held the ring for a second while a rank is gone, the waits
// behind it fail with a *TargetError naming the gone rank.
//
// # Progress
//
// Like the endpoint, a window belongs to one goroutine and has no progress
// thread: the endpoint's Poll (called by every blocking call of nemesis and
// of this package) runs the active messages that other ranks sent and
// advances this rank's operations. A target reached by active messages
// must therefore poll now and then, as an MPI process must enter the
// library for passive-target RMA over an active-message fallback.
//
// The package installs itself as the endpoint's nemesis.AMHandler at the
// first window.
package rma
