package auto

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/knemesis/knemesis/attach"
	_ "github.com/knemesis/knemesis/kmod/knem/knemlmt" // registers the knem backend
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	_ "github.com/knemesis/knemesis/pipe" // registers the pipe backend
	"github.com/knemesis/knemesis/threshold"
	_ "github.com/knemesis/knemesis/vmsplice" // registers the vmsplice backend
)

// Options tune Attach. The zero value is the automatic choice.
type Options struct {
	// Threshold says where the caches are detected (Detect), where the
	// tuning file is (TuningPath, default $KNEMESIS_TUNING) and, in
	// tests, which machine this is (Machine). Of its Env, Attach takes
	// Unavailable (backends never to use, with any peer) and DMA (the
	// module has a DMA channel); it fills the placement, Knem and each
	// peer's refusals itself, so Env's Placement must stay zero: give
	// CPUs and Concurrent instead.
	Threshold threshold.Config
	// CPUs is the CPU of each rank, by rank, when the caller knows them
	// better than the affinity masks do; nil detects them (see the
	// package documentation).
	CPUs []int
	// Concurrent is the number of large transfers each rank has in
	// flight at once (n-1 in an Alltoall of n ranks); 0 or 1 for one.
	Concurrent int
	// TableOnly sends every message by the table, without measurement.
	TableOnly bool
	// NoProbe skips timing a cache line to each peer (see probe.go's
	// comment): the tables then believe the topology. Every rank must
	// skip it alike, or each pair with one that does not costs the other
	// a ProbeTimeout wait once.
	NoProbe bool
	// ProbeTimeout is how long Attach waits for each peer to reach its
	// probe (default 100 ms: ranks started by one launcher reach Attach
	// within milliseconds of each other). A pair that misses it is built
	// from the topology alone.
	ProbeTimeout time.Duration
	// Attach is passed to attach.Attach. Its EagerMax, when set,
	// overrides the table's switch; its Select must be nil: choosing is
	// Attach's job.
	Attach attach.Options
}

// CPUSource says how Attach learned the CPU of a rank.
type CPUSource string

// Where a rank's CPU came from.
const (
	CPUGiven    CPUSource = "Options.CPUs"
	CPUAffinity CPUSource = "affinity" // its affinity mask holds one CPU
	CPUGuessed  CPUSource = "guessed"  // r-th CPU of its mask; unknown
)

// Pair is what Attach decided for messages to one peer.
type Pair struct {
	Peer      int
	Placement threshold.Placement
	// Unavailable lists the backends left out for this peer: refused by
	// the engine's check, or ruled out in Options.Threshold.Env.
	Unavailable []threshold.Backend
	// Refusals are the engine's reasons (an *lmt.Unavailable each, with
	// its fix) for the backends of Unavailable it refused, in that
	// order: those the caller ruled out have none. Where CMA is refused
	// (Yama's ptrace scope, another user namespace), cma-split and
	// multirail, whose rails are CMA's reads and writes, are refused for
	// the same reason.
	Refusals []error
	// candidates are the methods usable with the peer, for its Learner.
	candidates []threshold.Backend
	// Info holds the table, its thresholds with their sources, and the
	// warnings (a foreign tuning file) of this pair.
	Info *threshold.Info
	// Learner is the peer's learning selector, over the eager path and
	// the backends usable with it; nil with TableOnly.
	Learner *threshold.Learner
}

// Selection is an endpoint's LMT with its backends chosen per peer. It is
// the attach.LMT (Isend, Engine, Close) plus what was decided; wait with
// the endpoint's Wait, which sleeps on the LMT's pipes.
type Selection struct {
	*attach.LMT
	ep       *nemesis.Endpoint
	opts     Options
	pairs    []Pair     // by peer rank; the own rank's is zero
	slots    []selector // by peer rank, handed to attach as Selectors
	cpus     []int
	sources  []CPUSource
	job      []int           // CPUs of the whole job, when all are known
	first    *threshold.Info // the first pair's: the others derive from it
	eagerMax int
	readings []time.Duration   // this rank's cache-line readings, latest last
	regimes  threshold.Regimes // what they show
	// chooseAbove: messages of more than this many bytes, up to
	// eagerMax, go eagerly or not as each peer's selector decides.
	chooseAbove int
}

// learnedCandidates are the methods a peer's Learner weighs besides the
// table's choices, when usable with it: the eager cells, the backends
// that won somewhere on the machines measured, and arena-copy where the
// job has an arena (up to its slot size: medium messages without a
// system call). Pipe (two kernel copies)
// and cma-write never did; cma is the table's choice where one
// process_vm_readv beats cma-split's CTS. multirail is no table's choice
// without a tuning file (the formula knows no rail speeds): only
// measurement finds the sizes where its weighed cut beats cma-split's
// halves.
var learnedCandidates = []threshold.Backend{threshold.Eager, threshold.Shm, threshold.CMA, threshold.CMASplit, threshold.MultiRail, threshold.Vmsplice, threshold.Knem, threshold.ArenaCopy}

// LearnedCandidates returns the methods each peer's Learner weighs besides
// its table's choices, those usable with the peer among them (see
// learnedCandidates), for tools that say what auto measures.
func LearnedCandidates() []threshold.Backend { return slices.Clone(learnedCandidates) }

// learnEagerFrom is the smallest message whose eager/LMT switch is learned:
// below 4 KiB no LMT has beaten the cells, even KNEM in a collective
// (Buntinas et al., ICPP 2009, §4.4).
const learnEagerFrom = 4 << 10

// Attach creates the LMT engine of ep, builds the table of each peer and
// installs both. Every rank of the job must call it (or attach.Attach)
// before sending its first long message. The caller keeps ep; Close
// detaches the LMT.
func Attach(ep *nemesis.Endpoint, o Options) (*Selection, error) {
	if err := o.validate(ep); err != nil {
		return nil, err
	}
	s := &Selection{ep: ep, opts: o, slots: make([]selector, ep.Size()), pairs: make([]Pair, ep.Size())}
	ao := o.Attach
	ao.Select = func(peer int) attach.Selector { return &s.slots[peer] }
	var err error
	if s.LMT, err = attach.Attach(ep, ao); err != nil {
		return nil, fmt.Errorf("auto: attaching the LMT: %w", err)
	}
	if err := s.decide(); err != nil {
		s.LMT.Close()
		return nil, err
	}
	return s, nil
}

func (o *Options) validate(ep *nemesis.Endpoint) error {
	if ep == nil {
		return errors.New("auto: Attach needs an endpoint, got nil")
	}
	if o.Attach.Select != nil {
		return errors.New("auto: Options.Attach.Select is set: Attach installs its own selectors (call attach.Attach to choose yourself)")
	}
	if p := o.Threshold.Env.Placement; p.Sender != 0 || p.Receiver != 0 || p.JobCPUs != nil || p.Concurrent != 0 || p.LineLatency != 0 || p.Apart {
		return errors.New("auto: Options.Threshold.Env.Placement is set: Attach places each pair itself; give Options.CPUs and Options.Concurrent")
	}
	if o.ProbeTimeout < 0 {
		return fmt.Errorf("auto: Options.ProbeTimeout is %v, want 0 (the default) or more", o.ProbeTimeout)
	}
	if o.Concurrent < 0 {
		return fmt.Errorf("auto: Options.Concurrent is %d, want 0 or more transfers", o.Concurrent)
	}
	if o.CPUs != nil && len(o.CPUs) != ep.Size() {
		return fmt.Errorf("auto: Options.CPUs has %d entries for a job of %d ranks: give one CPU per rank", len(o.CPUs), ep.Size())
	}
	for r, c := range o.CPUs {
		if c < 0 {
			return fmt.Errorf("auto: Options.CPUs[%d] is %d, not a CPU number", r, c)
		}
	}
	return nil
}

// decide builds every peer's table and selector, then sets the eager limit.
func (s *Selection) decide() error {
	s.cpus, s.sources, s.job = placeRanks(s.ep, s.opts.CPUs)
	lat := make([]time.Duration, s.ep.Size()) // 0: not measured
	if !s.opts.NoProbe {
		probePeers(s.ep, cmp.Or(s.opts.ProbeTimeout, defaultProbeTimeout), lat)
	}
	s.learnRegimes(lat)
	for peer := range s.ep.Size() {
		if peer == s.ep.Rank() || s.ep.Remote(peer) {
			continue // a remote rank has one backend, net-read: no table, no selector
		}
		if err := s.build(peer, lat[peer]); err != nil {
			return err
		}
	}
	return s.setEagerMax()
}

// build makes peer's table and selector for a cache line measured at lat
// (0: not measured).
func (s *Selection) build(peer int, lat time.Duration) error {
	me, o := s.ep.Rank(), s.opts
	env := o.Threshold.Env
	env.Placement = threshold.Placement{Sender: s.cpus[me], Receiver: s.cpus[peer], JobCPUs: s.job, Concurrent: o.Concurrent, LineLatency: lat, Apart: s.regimes.Far(lat)}
	var refusals []error
	env.Unavailable, refusals, env.Knem = s.refused(peer, o.Threshold.Env.Unavailable)
	var info *threshold.Info
	var err error
	if s.first == nil {
		cfg := o.Threshold
		cfg.Env = env
		info, err = threshold.Load(cfg)
		s.first = info
	} else {
		info, err = s.first.For(env)
	}
	if err != nil {
		return fmt.Errorf("auto: the table for rank %d (cpu%d→cpu%d): %w", peer, s.cpus[me], s.cpus[peer], err)
	}
	p := Pair{Peer: peer, Placement: env.Placement, Unavailable: slices.Clone(env.Unavailable), Refusals: refusals, Info: info}
	if !env.Knem {
		p.Unavailable = append(p.Unavailable, threshold.Knem)
	}
	p.candidates = candidates(env)
	if s.LMT.Engine().Check(lmt.ArenaCopy, peer) != nil {
		// No arena in this job: not a refusal worth naming in Pair.Unavailable.
		p.candidates = slices.DeleteFunc(p.candidates, isArenaCopy)
	}
	s.pairs[peer] = p
	s.slots[peer].set(info.Table, nil)
	return nil
}

// learn gives every peer without one (or every peer, when all is set: the
// eager range changed) a Learner over the eager range of the endpoint.
func (s *Selection) learn(all bool) error {
	for peer := range s.pairs {
		p := &s.pairs[peer]
		if p.Info == nil || s.opts.TableOnly || p.Learner != nil && !all {
			continue
		}
		var err error
		if p.Learner, err = threshold.NewLearner(p.Info.Table, p.candidates, int64(s.eagerMax), int64(s.chooseAbove)); err != nil {
			return fmt.Errorf("auto: the selector for rank %d: %w", peer, err)
		}
		s.slots[peer].set(p.Info.Table, p.Learner)
	}
	return nil
}

// setEagerMax sets the endpoint's eager range. Options.Attach.EagerMax
// fixes the limit for every peer. Otherwise each peer decides its own
// switch: with the table alone, its table's LMTMin (the endpoint's limit
// is the largest of them, and the smallest opens the range); learning, its
// Learner, from learnEagerFrom (or a smaller switch) up to the largest
// switch rounded up to a whole size class (at least Nemesis' 64 KiB), so
// that the eager path competes with the LMT in every class it may serve.
func (s *Selection) setEagerMax() error {
	lo, hi := int64(-1), int64(-1)
	for _, p := range s.pairs {
		if p.Info != nil {
			m := p.Info.Table.LMTMin.Bytes
			if lo < 0 || m < lo {
				lo = m
			}
			hi = max(hi, m)
		}
	}
	oldMax, oldAbove := s.eagerMax, s.chooseAbove
	switch {
	case s.opts.Attach.EagerMax > 0:
		s.eagerMax = s.opts.Attach.EagerMax
		s.chooseAbove = s.eagerMax
	case lo < 0: // a job of one rank: nothing to decide
		s.eagerMax, s.chooseAbove = attach.DefaultEagerMax, attach.DefaultEagerMax
	case s.opts.TableOnly:
		s.eagerMax, s.chooseAbove = int(max(hi-1, 0)), int(max(lo-1, 0))
	default:
		top := max(hi, threshold.NemesisLMTMin)
		s.eagerMax = int(1)<<bits.Len64(uint64(top-1)) - 1
		s.chooseAbove = int(max(min(learnEagerFrom, lo)-1, 0)) // a tuned switch below 4 KiB stands
	}
	if err := s.LMT.SetEagerRange(s.chooseAbove, s.eagerMax); err != nil {
		return fmt.Errorf("auto: eager limit %d: %w", s.eagerMax, err)
	}
	return s.learn(oldMax != s.eagerMax || oldAbove != s.chooseAbove)
}

// Reprobe times the cache line to every peer again, as Attach did, and
// rebuilds the table of each pair whose placement changed regime
// (threshold.FindRegimes over this rank's readings, these included): on a
// VM the hypervisor may move the vCPUs after Attach (here between one core
// and two, every few seconds to hours), and a pair that no longer shares a
// core should leave the double copy. A rebuilt pair gets a fresh Learner
// (the costs it had learned belong to the other placement), and the eager
// limit follows the new tables. A
// peer that does not answer within the probe timeout keeps its table.
//
// Like Attach, every rank must call it, about at once, at a point where
// no rank needs another to progress a message (after a barrier, between a
// job's phases): the probe spins, moving no messages, about 0.1 ms per
// pair. It returns the peers whose table changed, in rank order.
func (s *Selection) Reprobe() ([]int, error) {
	lat := make([]time.Duration, s.ep.Size())
	probePeers(s.ep, cmp.Or(s.opts.ProbeTimeout, defaultProbeTimeout), lat)
	s.learnRegimes(lat)
	var changed []int
	for peer, p := range s.pairs {
		if p.Info == nil || lat[peer] == 0 {
			continue
		}
		if s.regimes.Far(lat[peer]) == p.Placement.Apart {
			s.pairs[peer].Placement.LineLatency = lat[peer]
			continue
		}
		if err := s.build(peer, lat[peer]); err != nil {
			return changed, err
		}
		changed = append(changed, peer)
	}
	if len(changed) == 0 {
		return nil, nil
	}
	return changed, s.setEagerMax()
}

// maxReadings bounds the line readings a rank keeps: the latest ones say
// what the machine does now.
const maxReadings = 64

// learnRegimes adds the readings of a probe (0: not measured) to this
// rank's and finds their regimes again (threshold.FindRegimes): a pair is
// measured apart only when its line falls in the slow one of two regimes
// this rank has seen, never by a fixed line.
func (s *Selection) learnRegimes(lat []time.Duration) {
	for _, d := range lat {
		if d > 0 {
			s.readings = append(s.readings, d)
		}
	}
	if n := len(s.readings); n > maxReadings {
		s.readings = append(s.readings[:0], s.readings[n-maxReadings:]...)
	}
	s.regimes = threshold.FindRegimes(s.readings)
}

// Regimes returns what this rank's cache-line readings show: one regime,
// or near and far pairs.
func (s *Selection) Regimes() threshold.Regimes { return s.regimes }

// refused lists the backends of threshold.Backends the engine cannot use
// with peer, after those the caller ruled out, with the engine's reason
// for each it refused, and whether KNEM can serve it.
func (s *Selection) refused(peer int, ruledOut []threshold.Backend) (unavailable []threshold.Backend, why []error, knem bool) {
	unavailable = slices.Clone(ruledOut)
	eng := s.LMT.Engine()
	for _, b := range threshold.Backends {
		if b == threshold.Knem {
			// threshold counts KNEM out through Env.Knem: a
			// machine without the module is not a refusal.
			continue
		}
		if slices.Contains(unavailable, b) {
			continue
		}
		if err := eng.Check(string(b), peer); err != nil {
			unavailable = append(unavailable, b)
			why = append(why, err)
		}
	}
	knem = eng.Check(string(threshold.Knem), peer) == nil && !slices.Contains(ruledOut, threshold.Knem)
	return unavailable, why, knem
}

// candidates are the learnedCandidates usable with env's peer.
func candidates(env threshold.Env) []threshold.Backend {
	var cands []threshold.Backend
	for _, b := range learnedCandidates {
		if b == threshold.Knem && !env.Knem || slices.Contains(env.Unavailable, b) {
			continue
		}
		cands = append(cands, b)
	}
	return cands
}

// EagerMax is the endpoint's eager limit: no longer message goes by the
// Nemesis cells. Each peer decides for messages of more than
// [Selection.ChooseAbove] bytes up to it (see setEagerMax); shorter ones
// always go eagerly.
func (s *Selection) EagerMax() int { return s.eagerMax }

// ChooseAbove is the size above which each peer's selector decides whether
// a message up to EagerMax goes eagerly (EagerMax when none does).
func (s *Selection) ChooseAbove() int { return s.chooseAbove }

// Pair returns the decision for messages to peer, or nil for the own rank
// and ranks outside the job.
func (s *Selection) Pair(peer int) *Pair {
	if peer < 0 || peer >= len(s.pairs) || s.pairs[peer].Info == nil {
		return nil
	}
	return &s.pairs[peer]
}

// CPU returns the CPU Attach placed rank on and how it learned it.
func (s *Selection) CPU(rank int) (int, CPUSource) {
	if rank < 0 || rank >= len(s.cpus) {
		return -1, ""
	}
	return s.cpus[rank], s.sources[rank]
}

// Warnings are the problems the user should hear about that did not stop
// the choice (a foreign or broken tuning file, a measured backend now
// unavailable), each once.
func (s *Selection) Warnings() []string {
	var out []string
	for _, p := range s.pairs {
		if p.Info == nil {
			continue
		}
		for _, w := range p.Info.Warnings {
			if !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}

// Describe prints the eager limit, the placement of the ranks and, for
// each peer, the backends refused with it and why, and its table with the
// source of every threshold.
func (s *Selection) Describe(w io.Writer) error {
	fmt.Fprintf(w, "eager limit: %d bytes (larger messages go through the LMT)\n", s.eagerMax)
	if s.chooseAbove < s.eagerMax {
		fmt.Fprintf(w, "eager or LMT decided per peer for %d to %d bytes\n", s.chooseAbove+1, s.eagerMax)
	}
	ranks := make([]string, len(s.cpus))
	for r, c := range s.cpus {
		ranks[r] = fmt.Sprintf("%d:cpu%d (%s)", r, c, s.sources[r])
	}
	fmt.Fprintf(w, "ranks: %s\n", strings.Join(ranks, ", "))
	for _, p := range s.pairs {
		if p.Info == nil {
			continue
		}
		fmt.Fprintf(w, "\nto rank %d: cpu%d→cpu%d", p.Peer, p.Placement.Sender, p.Placement.Receiver)
		if len(p.Unavailable) > 0 {
			fmt.Fprintf(w, ", without %s", joinBackends(p.Unavailable))
		}
		if p.Learner != nil {
			fmt.Fprintf(w, ", measuring %s", joinBackends(p.Learner.Candidates()))
		} else {
			fmt.Fprint(w, ", table only")
		}
		fmt.Fprintln(w)
		for _, why := range p.Refusals {
			fmt.Fprintf(w, "  %v\n", why)
		}
		if err := p.Info.Describe(w); err != nil {
			return err
		}
	}
	return nil
}

func joinBackends(bs []threshold.Backend) string {
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = string(b)
	}
	return strings.Join(names, " ")
}

// selector is one peer's attach.Selector and attach.EagerChooser. It
// exists before its table (the table needs the engine's checks, the engine
// needs the selectors), and sends everything the engine's way until set.
type selector struct {
	table   *threshold.Table
	learner *threshold.Learner // nil: the table alone
	eager   int                // the learner's index of the eager path
	// below carries the messages that are past the endpoint's eager
	// limit but below this peer's own switch (peers' tables differ).
	below string
}

func (s *selector) set(t *threshold.Table, l *threshold.Learner) {
	s.table, s.learner, s.eager = t, l, -1
	if l != nil {
		s.eager = l.Index(threshold.Eager)
	}
	if len(t.Rules) > 0 {
		s.below = string(t.Rules[0].Backend)
	}
}

// Eager implements attach.EagerChooser: the learner's choice, or the
// table's switch for this peer.
func (s *selector) Eager(size int64) bool {
	switch {
	case s.table == nil:
		return true
	case s.learner != nil:
		return s.learner.Choose(size) == threshold.Eager
	}
	return size < s.table.LMTMin.Bytes
}

// ObserveEager implements attach.EagerChooser. The sender sees its own
// copy into the cells, not the receiver's copy out of them, the same copy
// the other way: the eager path is charged twice what the sender saw, as
// an LMT backend is charged its whole payload movement (lmt.Stats.Moving).
func (s *selector) ObserveEager(size int64, elapsed time.Duration) {
	if s.learner != nil {
		s.learner.Record(size, s.eager, 2*elapsed)
	}
}

// Backend implements attach.Selector.
func (s *selector) Backend(size int64) string {
	if s.table == nil {
		return ""
	}
	c := s.table.Choose(size)
	if c.DMA {
		// DMA offload is the knem backend's own decision
		// (threshold.DecideCopy), not a CPU backend's cost.
		return string(c.Backend)
	}
	if s.learner != nil {
		if b := s.learner.Choose(size); b != threshold.Eager {
			return string(b)
		}
		return s.below
	}
	if c.Eager {
		return s.below
	}
	return string(c.Backend)
}

// Observe implements attach.Selector.
func (s *selector) Observe(backend string, size int64, elapsed time.Duration) {
	if s.learner != nil {
		s.learner.Record(size, s.learner.Index(threshold.Backend(backend)), elapsed)
	}
}

func isArenaCopy(b threshold.Backend) bool { return b == threshold.ArenaCopy }
