// Package threshold chooses how a message of a given size travels between
// two processes on one machine: eagerly through the Nemesis queues, or through
// one of the Large Message Transfer (LMT) backends, with or without DMA
// offload.
//
// No mechanism wins everywhere (Buntinas, Goglin, Goodell, Mercier and
// Moreaud, "Cache-Efficient, Intranode, Large-Message MPI Communication with
// MPICH2-Nemesis", ICPP 2009, §3.5 and §4). The choice depends on three
// facts:
//
//   - the cache topology: which caches exist, how large they are and which
//     CPUs share each one (package topology detects it: sysfs, CPUID, or
//     the $KNEMESIS_CACHE override);
//   - where the two processes run: when they share a cache, the shared-memory
//     double copy stays inside it and beats every single-copy mechanism
//     (in ping-pong the buffer just received is still dirty in the peer's
//     cache, which halves CMA and KNEM kernel copies);
//   - what the kernel offers: the KNEM module, and a DMA channel behind it.
//
// This package holds the policy: it decides from a [topology.Topology]
// ([Load] asks package topology for this machine's), so that recorded
// machines test every rule.
//
// From these, [Build] derives the eager→LMT switch size, DMA_min (the size
// above which a copy would flush the receiver's cache, so DMA offload pays)
// and a size→backend [Table]. Every number carries its [Source], so that
// `lmtbench info` can say whether it came from the tuning file, the paper's
// formula or a fixed default (and the cache behind DMA_min its
// topology.Source). Measurements replace the formula: [Tune] turns
// per-backend throughput at a series of sizes into a table, and a
// [TuningFile] keeps it, tied to the machine it was measured on.
//
// Which cache DMA_min uses: the outermost cache the two processes share
// (the 4 MiB L2 of a core pair on the paper's Xeon E5345, the CCX's L3 on
// AMD), or, when they share none, the receiver's outermost cache. The paper
// ties the threshold to "the largest cache" because the receiving copy
// streams the message through every level: it is the outermost one that
// must hold twice the message for each of its users, or the copy evicts the
// working set of everyone behind it. Its users are the job's processes on
// that cache when their placement is known ([Placement.JobCPUs]), else the
// cores sharing it (one process per core, the paper's second formula).
//
// A table is a prediction from the caches. [Learner] corrects it per size
// class from the job's own transfer times, the eager path included, and
// settles (package auto gives one to each peer). [Adaptive] corrects it while the
// job runs, from how long each message's payload took to move, for machines
// where the best backend changes under the job (a VM whose vCPUs move between
// one core and two) or with the job's buffer reuse; package attach takes
// one per peer in Options.Select.
//
// CPU copy or DMA offload is decided in one place, [DecideCopy]: DMA pays
// strictly above DMA_min, lowered by the transfers in flight (§4.4), with
// asynchronous completion when a status slot is free. [Build] places the
// table's DMA rule at the same size, and the knem backend asks DecideCopy
// per transfer with [MachineDMAMin] when it does not know its peer's CPU.
// Package ioat only says whether a DMA engine is there.
//
// The table is built once; [Table.Choose] and [DecideCopy] are the
// per-message calls: a scan of a few rules or a comparison, without
// allocation, lock or map lookup.
package threshold
