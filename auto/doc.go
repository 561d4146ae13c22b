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
// first). [Attach] gives each peer what package threshold decides: the
// eager→LMT switch of the pair, and its size→backend table, from a tuning
// file that `lmtbench tune` measured on this machine, else from the
// paper's rules over the cache topology and the pair's placement. Unless
// Options.TableOnly, each peer's [threshold.Learner] then corrects the
// table by measuring the candidates on the sender's own completions, and
// re-checks rarely. docs/design/auto.md says what each decision is made
// from and why.
//
// Attach is collective: every rank calls it, and it times a cache line
// between the ranks of every pair to tell whether they really share a
// cache (Options.NoProbe skips that, every rank alike).
// [Selection.Reprobe], called by every rank at once between a job's
// phases, measures again and rebuilds the tables of the pairs whose
// placement changed.
//
// Availability is checked per peer with the engine: a peer whose CMA is
// refused gets a table without the CMA backends, while other peers keep
// them; [Pair].Refusals holds the engine's reason for each. Importing the
// package registers the pipe, vmsplice and knem backends, so a program
// importing it has every backend the machine offers.
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
// What was decided, and why, is in [Selection.Pair] and
// [Selection.Describe]. The per-message path allocates nothing, takes no
// lock and looks nothing up in a map.
package auto
