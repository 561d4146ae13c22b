// Package auto attaches the LMT engine to a Nemesis endpoint with the
// backend of every message chosen for the machine and the pair of
// processes, as MPICH, Open MPI and UCX choose their protocols by default:
//
//	ep, _ := nemesis.JoinProc(p, nil)
//	sel, _ := auto.Attach(ep, auto.Options{})
//	defer sel.Close()
//	ep.Send(peer, tag, big)   // eager or LMT, and which backend: decided here
//
// [attach.Attach] alone gives the engine's fixed preference list (shm
// first). Attach gives, for each peer, what package threshold decides:
//
//   - The eager→LMT switch, per peer. Each pair starts from its table's
//     LMTMin: 64 KiB (MPICH's switch) by default, 16 KiB or 4 KiB when the
//     KNEM module serves a pair sharing no cache (the paper's §3.5 and
//     §4.4), or the crossover `lmtbench tune` measured. Learning (the
//     default), the endpoint asks the peer's selector for every message
//     from 4 KiB to [Selection.EagerMax] (the largest switch rounded up to
//     a size class, at least 64 KiB) whether it goes eagerly: the eager
//     path is one more candidate of the pair's [threshold.Learner]. With
//     Options.TableOnly each peer keeps its table's switch exactly.
//   - The size→backend table of the pair. With a tuning file written by
//     `lmtbench tune` on this machine (found at $KNEMESIS_TUNING, else
//     knemesis/tuning.json in the user's configuration directory), its
//     measured switches; without one, or when it was measured on another
//     machine (another CPU model, kernel, cache layout or host:
//     [threshold.ErrForeignTuning]), the paper's rules: the shm double copy while the pair shares a cache,
//     else the one-copy mechanism (KNEM, cma-split, CMA, vmsplice, the first
//     usable), and KNEM with DMA offload above DMA_min = cache / (2 × its
//     users).
//     A foreign file is ignored with a warning in [Selection.Warnings].
//   - Correction by measurement. Unless Options.TableOnly, each peer gets
//     its own [threshold.Learner]: per power-of-two size class it starts
//     from the table's choice, measures every candidate (the eager path
//     where a message may take it; shm, cma, cma-split, multirail,
//     vmsplice, knem, and arena-copy where the job has an arena: those
//     usable with that peer) a few messages each, from the sender's
//     own completions, settles on the fastest, and re-checks rarely (after
//     64 messages, then twice as many each time the choice holds; a
//     re-check measures the candidates within 1.5 times the settled one's
//     cost, every fourth all of them) or, all of them, at once when the
//     settled one slows down by half. Another candidate
//     displaces the settled one only when more than 5% faster, so two close
//     ones do not take turns, and of two more than 10% apart the faster
//     always wins. On virtual machines the
//     best backend changes with the placement of the vCPUs; only
//     measurement follows it. multirail (cma-split cut by each rail's
//     measured speed) is no formula's choice either: measurement, or a
//     tuning file, finds the sizes where it wins. The sender does not see the receiver's copy
//     out of the cells: an eager message counts twice its copy in.
//
// # What the decision is made from
//
// The cache topology comes from sysfs, else CPUID, overridden by
// $KNEMESIS_CACHE ([topology.EnvCache]). The placement of each pair is the
// CPU of each rank: Options.CPUs when the caller knows them; else, for each
// rank, the one CPU its affinity mask holds when the launcher pinned it
// (taskset, mpirun --bind-to core, srun --cpu-bind: the mask of the rank's
// main thread, read through its PID); else a guess: rank r on the r-th CPU
// of its mask, counting round, as the scheduler spreads busy processes (for
// two unpinned ranks, CPUs 0 and 1 — what lmtbench assumes). The CPUs of
// the whole job feed DMA_min's count of cache users only when every rank's
// CPU is known, not guessed; otherwise DMA_min divides by the cores
// sharing the cache (the paper's second formula, one process per core).
// Options.Concurrent says how many large transfers each rank has in flight
// (collectives), which lowers DMA_min and, with KNEM, the switch.
//
// Whether a pair really shares its cache is also measured: Attach times a
// cache line between the two ranks of every pair
// ([nemesis.Endpoint.LineLatency], pairs meeting in the rounds of a
// round-robin tournament, about 0.1 ms each). A rank files its pairs near
// or far only where its readings (those of every probe so far) show two
// regimes, split at a gap ([threshold.FindRegimes]), never by a fixed
// line: a pair in the slow regime gets the table of a pair sharing
// nothing, whatever the topology says (a VM's sysfs may report one L3 for
// both vCPUs wherever the hypervisor runs them, and the double copy is
// worth several times less when they do not share a core:
// docs/performance.md); with one regime the topology decides, and the
// Learner corrects the start by measurement. [Selection.Regimes] says
// what was found. Options.NoProbe skips it (every rank alike: a peer that
// does not take part costs the others 100 ms once, then its pairs use the
// topology). The hypervisor may move the vCPUs later:
// [Selection.Reprobe], called by every rank at once between a job's
// phases, times every pair again and rebuilds the tables (and the eager
// limit) of the pairs whose reading changed regime. Two ranks on one CPU
// measure the
// context switch: they share nothing the double copy could use.
//
// Availability is checked per peer with the engine (lmt.Engine.Check): a
// peer whose CMA is refused (ptrace rules, another user namespace) gets a
// table and candidates without cma, cma-split and multirail (the rails of
// the last two are CMA's reads and writes), while other peers keep them;
// [Pair].Refusals holds the engine's reason for each. This package registers the pipe, vmsplice and knem backends, so a
// program importing it has every backend the machine offers.
//
// # Overriding
//
//   - Caches: $KNEMESIS_CACHE, or Options.Threshold.Detect.
//   - Thresholds and backends: a tuning file (`lmtbench tune`), its path in
//     $KNEMESIS_TUNING or Options.Threshold.TuningPath.
//   - Backends never to use: Options.Threshold.Env.Unavailable.
//   - Placement: Options.CPUs; concurrency: Options.Concurrent; the
//     cache-line probe: Options.NoProbe.
//   - The eager limit: Options.Attach.EagerMax.
//   - One message: [attach.LMT.Isend] with a backend name (the Selection
//     is an *attach.LMT).
//
// What was decided, and why, is in [Selection.Pair] (each peer's
// [threshold.Info] and placement) and [Selection.Describe].
//
// The per-message path allocates nothing, takes no lock and looks nothing
// up in a map: the selector of a peer is found by index, its table is a
// scan of a few rules and its costs a fixed array.
package auto
