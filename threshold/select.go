package threshold

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/knemesis/knemesis/internal/bytesize"
	"github.com/knemesis/knemesis/topology"
)

// Fixed switch sizes from the paper and from MPICH, used when nothing
// measured says otherwise.
const (
	// NemesisLMTMin is MPICH2-Nemesis' hardwired eager→LMT switch.
	NemesisLMTMin = 64 << 10
	// KnemLMTMin is where the KNEM kernel copy starts to beat the eager
	// double copy in ping-pong (§3.5: "near 16 KiB"; §4.2 saw 8 KiB).
	KnemLMTMin = 16 << 10
	// CMALMTMin is where process_vm_readv starts to beat the eager copy
	// between two CPUs sharing no cache, measured as KNEM's §3.5 switch
	// was (docs/performance.md, threshold). Where the two share a core the
	// cells win up to Nemesis' 64 KiB switch.
	CMALMTMin = 16 << 10
	// CMASplitMin is where cma-split, whose second half waits for the
	// CTS, overtakes a single process_vm_readv (same measurements).
	CMASplitMin = 24 << 10
	// KnemLMTMinConcurrent is the same switch in a memory-bound collective
	// (§4.4: KNEM pays from 4 KiB in an 8-process Alltoall).
	KnemLMTMinConcurrent = 4 << 10
)

// Env is everything [Build] needs to know about the machine and the job.
type Env struct {
	Topology *topology.Topology
	Placement
	// Knem is true when /dev/knem answers GET_INFO with the expected ABI;
	// DMA when its DMA feature bit says a DMA_MEMCPY channel is usable.
	Knem, DMA bool
	// Unavailable lists backends this process cannot use although the
	// kernel has them (CMA refused by ptrace restrictions, say).
	Unavailable []Backend
	// Tuning, when non-nil and from this machine, replaces the formula's
	// backend switches by measured ones.
	Tuning *TuningFile
}

func (e *Env) available(b Backend) bool {
	if b == Knem && !e.Knem {
		return false
	}
	return !slices.Contains(e.Unavailable, b)
}

// Rule sends sizes from From up to the next rule's From to Backend.
type Rule struct {
	From    int64
	Backend Backend
	DMA     bool // offload the copy to the DMA engine (Backend is Knem)
	Source  Source
	Why     string
}

// Range writes the rule's lower bound: "≥ 64 KiB", or "> 8 MiB" for a rule
// that starts just above a threshold.
func (r Rule) Range() string {
	if below := r.From - 1; below > 0 && !strings.HasSuffix(bytesize.Format(below), " B") {
		return "> " + bytesize.Format(below)
	}
	return "≥ " + bytesize.Format(r.From)
}

// Choice is what [Table.Choose] answers for one message.
type Choice struct {
	Eager   bool    // below the LMT switch: Nemesis cells, Backend unset
	Backend Backend // the LMT backend
	DMA     bool    // ask the module for DMA offload
}

// Table is the size→backend decision for one pair of processes.
type Table struct {
	LMTMin Threshold      // messages smaller than this go eagerly
	DMAMin Threshold      // the formula's value, whether or not DMA exists
	Cache  topology.Cache // the cache DMA_min was computed from
	Shared bool           // the pair shares Cache (and measured so, when measured)
	// LineLatency is the pair's measured one-way cache-line time (0 when
	// not measured); Shared is false whenever Placement.Apart.
	LineLatency time.Duration
	Rules       []Rule // ascending From; Rules[0].From == LMTMin.Bytes
	Notes       []string
}

// Choose returns the transfer method for a message of size bytes. It is the
// per-message call: no allocation, lock or map lookup.
func (t *Table) Choose(size int64) Choice {
	if size < t.LMTMin.Bytes || len(t.Rules) == 0 {
		return Choice{Eager: true}
	}
	r := &t.Rules[0]
	for i := 1; i < len(t.Rules) && t.Rules[i].From <= size; i++ {
		r = &t.Rules[i]
	}
	return Choice{Backend: r.Backend, DMA: r.DMA}
}

// Build derives the table for env.
//
// The defaults follow the paper, corrected by measurements of machines
// whose two cores share a cache (docs/performance.md, threshold, gives
// them with machine and command):
//
//   - Pair sharing a cache: the shared-memory double copy up to DMA_min
//     included, i.e. while the message fits the shared cache. The paper
//     already found shm faster than vmsplice there (§4.1) and KNEM only
//     "almost as fast" (§4.2); in NetPIPE-style ping-pong, where the
//     buffer to read is still dirty in the peer's cache, a single copy
//     (CMA, the KNEM kernel copy) runs at half the double copy's rate.
//   - Pair sharing no cache: the KNEM module when loaded, from 16 KiB
//     (4 KiB with concurrent transfers); else CMA from 16 KiB (CMALMTMin,
//     measured), cma-split from 24 KiB, whose two halves two CPUs copy at
//     once (measured nearly twice as fast as one process_vm_readv from
//     1 MiB on); else vmsplice from Nemesis' 64 KiB.
//   - A pair the topology says shares a cache, but measured apart
//     (Placement.Apart: its cache line in the slow one of two regimes the
//     job measured), is taken to share none: a VM's sysfs and CPUID
//     describe the vCPUs, not where the hypervisor runs them now.
//   - Above DMA_min, not at it (§3.5 wants a cache "at least two times
//     larger" than the message), DMA_min being lowered by concurrent
//     transfers: KNEM with DMA offload when the module has a channel.
//     Without DMA a pair sharing a cache keeps the double copy even past
//     the cache: both ends then stream from memory, and two cores copying
//     in a pipeline keep up with one core copying once, in every
//     measurement at hand. The paper's reason to leave it, a flushed
//     cache, is what DMA fixes and a CPU single copy does not.
//
// A tuning file from this machine replaces the backend switches and the
// eager→LMT size. DMA_min stays the formula's: tuning measures backends,
// not the engine behind the module.
func Build(env Env) (*Table, error) {
	if env.Topology == nil {
		return nil, fmt.Errorf("threshold: Build needs a topology")
	}
	dmaMin, cache, err := DMAMin(env.Topology, env.Placement)
	if err != nil {
		return nil, err
	}
	sc, shared := env.Topology.SharedCache(env.Sender, env.Receiver)
	t := &Table{DMAMin: dmaMin, Cache: cache, LineLatency: env.LineLatency}
	if shared && env.Apart {
		// A VM's topology does not follow its vCPUs around the host.
		shared = false
		t.Notes = append(t.Notes, fmt.Sprintf("the topology says the pair shares its %s, but a cache line takes %v one way between them, in the slow one of two regimes measured: treated as sharing no cache",
			sc.Name(), env.LineLatency))
	}
	t.Shared = shared
	concurrent := env.Concurrent > 1

	// The double copies come last: the one-copy mechanisms beat them
	// unless the pair shares a cache. Shm stands in when nothing is
	// available, which only a caller's own Unavailable list can cause.
	single := Shm
	for _, b := range []Backend{Knem, CMASplit, CMA, Vmsplice, Shm, Pipe} {
		if env.available(b) {
			single = b
			break
		}
	}
	t.LMTMin = Threshold{Bytes: NemesisLMTMin, Source: SourceDefault, Why: "MPICH2-Nemesis hardwired LMT switch"}
	switch {
	case single == Knem && !shared:
		t.LMTMin = Threshold{Bytes: KnemLMTMin, Source: SourceDefault, Why: "KNEM beats the eager copy from ~16 KiB (§3.5)"}
		if concurrent {
			t.LMTMin = Threshold{Bytes: KnemLMTMinConcurrent, Source: SourceDefault, Why: "KNEM pays from 4 KiB in collectives (§4.4)"}
		}
	case (single == CMASplit || single == CMA) && !shared:
		t.LMTMin = Threshold{Bytes: CMALMTMin, Source: SourceDefault, Why: "one process_vm_readv beats the eager copy from ~16 KiB between CPUs sharing no cache (measured, like KNEM's §3.5)"}
	}

	if tuned := env.Tuning.table(shared, concurrent); tuned != nil {
		if err := t.applyTuning(tuned, &env); err != nil {
			t.Notes = append(t.Notes, "tuning file ignored: "+err.Error())
		}
	}
	if len(t.Rules) == 0 {
		t.formulaRules(single, shared, env.available(Shm), env.available(CMA))
	}
	if env.DMA && env.available(Knem) {
		t.add(Rule{From: max(offloadFrom(dmaMin.Bytes), t.LMTMin.Bytes), Backend: Knem, DMA: true, Source: SourceFormula,
			Why: "DMA offload above DMA_min keeps the receiver's cache"})
	}
	return t, nil
}

// formulaRules writes the formula's LMT rules: the double copy when the
// pair shares a cache and may use shm, else the single-copy mechanism.
func (t *Table) formulaRules(single Backend, shared, shm, cma bool) {
	lmt := t.LMTMin.Bytes
	switch {
	case !shared && single == CMASplit && cma && lmt < CMASplitMin:
		t.add(Rule{From: lmt, Backend: CMA, Source: SourceFormula,
			Why: "no shared cache: one copy beats the double copy (§4.1, §4.2); cma-split's CTS does not pay yet"})
		t.add(Rule{From: CMASplitMin, Backend: CMASplit, Source: SourceFormula,
			Why: "no shared cache: one copy, its two halves copied by the two CPUs at once (measured)"})
	case !shared:
		t.add(Rule{From: lmt, Backend: single, Source: SourceFormula,
			Why: "no shared cache: one copy beats the double copy (§4.1, §4.2)"})
	case !shm:
		t.add(Rule{From: lmt, Backend: single, Source: SourceFormula,
			Why: fmt.Sprintf("%s shared, but shm is unavailable: the next mechanism", t.Cache.Name())})
	default:
		t.add(Rule{From: lmt, Backend: Shm, Source: SourceFormula,
			Why: fmt.Sprintf("%s shared: the double copy is never slower than one copy here, and twice as fast on dirty lines (baselines)", t.Cache.Name())})
	}
}

// add inserts r, dropping rules it hides and merging it into an equal
// predecessor, so that the table stays short and ascending.
func (t *Table) add(r Rule) {
	rules := t.Rules[:0]
	for _, old := range t.Rules {
		if old.From < r.From {
			rules = append(rules, old)
		}
	}
	if n := len(rules); n > 0 && rules[n-1].Backend == r.Backend && rules[n-1].DMA == r.DMA {
		t.Rules = rules
		return
	}
	t.Rules = append(rules, r)
}

func (t *Table) applyTuning(tuned *TunedTable, env *Env) error {
	for _, r := range tuned.Rules {
		if !env.available(r.Backend) {
			return fmt.Errorf("measured backend %s is not available now", r.Backend)
		}
	}
	if tuned.LMTMin > 0 {
		t.LMTMin = Threshold{Bytes: tuned.LMTMin, Source: SourceTuning, Why: "measured crossover eager→LMT"}
	}
	for _, r := range tuned.Rules {
		from := max(r.From, t.LMTMin.Bytes)
		t.add(Rule{From: from, Backend: r.Backend, Source: SourceTuning, Why: "measured fastest from here"})
	}
	if len(t.Rules) > 0 {
		t.Rules[0].From = t.LMTMin.Bytes
	}
	return nil
}
