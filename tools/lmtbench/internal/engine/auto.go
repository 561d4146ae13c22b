package engine

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/knemesis/knemesis/lmt/attach"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/threshold"
)

// "auto" is the automatic choice. Package threshold builds the size→backend
// table for the pair of CPUs the ranks run on (the tuning file when
// `lmtbench tune` wrote one for this machine, else the paper's formula);
// messages below its eager→LMT switch stay on the Nemesis cells; larger ones
// go where threshold.Adaptive, installed with attach.Options.Select, says:
// the table's backend until measurement shows another candidate moving that
// size class faster. The table is a prediction from the caches; on this VM
// the best backend changes with the vCPUs' placement every few seconds
// (near: shm about 21 GB/s at 1-4 MiB, cma-split 14; far: cma-split 10-13,
// shm 5-6), which only measurement can follow.
//
// "table" is the table alone, one Table.Choose per message, for comparison.
func init() {
	register(Backend{
		Name:        "auto",
		Summary:     "the automatic choice: package threshold's table corrected by measurement (threshold.Adaptive), through lmt/attach",
		Check:       func() error { return nil },
		SharedBytes: func(int) int { return 0 },
		Open:        func(p Peer) (Engine, error) { return openAuto(p, true) },
	})
	register(Backend{
		Name:        "table",
		Summary:     "package threshold's size→backend table alone, without measurement",
		Check:       func() error { return nil },
		SharedBytes: func(int) int { return 0 },
		Open:        func(p Peer) (Engine, error) { return openAuto(p, false) },
		OnRequest:   true,
	})
}

// adaptiveCandidates are the backends auto weighs against the table's
// choice: pipe (two kernel copies), cma and cma-write (one CPU making the
// copy cma-split shares between two) never beat them here.
var adaptiveCandidates = []threshold.Backend{threshold.Shm, threshold.CMASplit, threshold.Vmsplice, threshold.Knem}

// candidates are the adaptiveCandidates usable with env's peer.
func candidates(env threshold.Env) []threshold.Backend {
	var cands []threshold.Backend
	for _, b := range adaptiveCandidates {
		if b == threshold.Knem && !env.Knem || slices.Contains(env.Unavailable, b) {
			continue
		}
		cands = append(cands, b)
	}
	return cands
}

// selectorSlot lets the endpoint's LMT be attached before the table
// exists: the table needs the engine's availability checks.
type selectorSlot struct{ a *threshold.Adaptive }

func (s *selectorSlot) Backend(size int64) string {
	if s.a == nil {
		return ""
	}
	return s.a.Backend(size)
}

func (s *selectorSlot) Observe(backend string, size int64, elapsed time.Duration) {
	if s.a != nil {
		s.a.Observe(backend, size, elapsed)
	}
}

func openAuto(p Peer, adaptive bool) (Engine, error) {
	if p.Proc.Size != 2 {
		return nil, fmt.Errorf("auto: runs between exactly 2 processes, job has %d", p.Proc.Size)
	}
	me, peer := p.Proc.Rank, 1-p.Proc.Rank
	cpus := p.CPUs
	if len(cpus) != 2 {
		// Unpinned: the selector still needs a pair; 0 and 1 are what
		// the scheduler most likely gives two busy processes.
		cpus = []int{0, 1}
	}
	ep, err := nemesis.JoinProc(p.Proc, nil)
	if err != nil {
		return nil, fmt.Errorf("auto: joining the Nemesis job: %w", err)
	}
	slot := &selectorSlot{}
	opts := attach.Options{EagerMax: 1}
	if adaptive {
		opts.Select = func(int) attach.Selector { return slot }
	}
	att, err := attach.Attach(ep, opts)
	if err != nil {
		ep.Close()
		return nil, fmt.Errorf("auto: attaching the LMT: %w", err)
	}
	e := &lmtEngine{ep: ep, att: att, peer: peer}
	env := threshold.Env{
		Placement: threshold.Placement{Sender: cpus[me], Receiver: cpus[peer], JobCPUs: cpus},
		Knem:      knemDevice() == nil,
	}
	for _, b := range threshold.Backends {
		if b == threshold.Knem {
			continue // not an lmt backend in this build: see knem below
		}
		if att.Engine().Check(string(b), peer) != nil {
			env.Unavailable = append(env.Unavailable, b)
		}
	}
	if env.Knem && lmtRegistered("knem") != nil {
		env.Knem = false
	}
	info, err := threshold.Load(threshold.Config{Env: env})
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("auto: the selector: %w", err)
	}
	table := info.Table
	eager := int(table.LMTMin.Bytes) - 1
	if err := ep.SetLMT(att, max(eager, 0)); err != nil {
		e.Close()
		return nil, fmt.Errorf("auto: eager limit %d: %w", eager, err)
	}
	if adaptive {
		if slot.a, err = threshold.NewAdaptive(table, candidates(env)); err != nil {
			e.Close()
			return nil, fmt.Errorf("auto: %w", err)
		}
		return e, nil
	}
	e.choose = func(size int) string {
		c := table.Choose(int64(size))
		if c.Eager {
			return ""
		}
		return string(c.Backend)
	}
	return e, nil
}

// knemDevice checks the KNEM device the module creates.
func knemDevice() error {
	if _, err := os.Stat("/dev/knem"); err != nil {
		return &Unavailable{Backend: "knem", Reason: "/dev/knem missing",
			Fix: "load the module with modprobe knem (this host's kernel cannot load modules: the module runs only in the QEMU guest of ci/)"}
	}
	return nil
}
