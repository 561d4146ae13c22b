package engine

import (
	"fmt"
	"os"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
)

// "auto" is the automatic choice, as a program gets it from package
// auto: package threshold builds the size→backend table for the pair of
// CPUs the ranks run on (the tuning file when `lmtbench tune` wrote one for
// this machine, else the paper's formula); messages below its eager→LMT
// switch stay on the Nemesis cells; larger ones go where the pair's
// threshold.Learner says: the table's backend until measurement shows
// another candidate (multirail among them) moving that size class faster. The table is a prediction from the
// caches; on a VM the best backend may change with the vCPUs' placement
// every few seconds (shm ahead with both vCPUs on one core, cma-split
// well ahead with them on two: docs/performance.md, tools/lmtbench), which
// only measurement can follow.
//
// "table" is the table alone (auto.Options.TableOnly), for comparison.
func init() {
	register(Backend{
		Name:        "auto",
		Summary:     "the automatic choice: package threshold's table corrected by measurement (threshold.Learner), through attach",
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

func openAuto(p Peer, adaptive bool) (Engine, error) {
	if p.Proc.Size != 2 {
		return nil, fmt.Errorf("auto: runs between exactly 2 processes, job has %d", p.Proc.Size)
	}
	ep, err := nemesis.JoinProc(p.Proc, nil)
	if err != nil {
		return nil, fmt.Errorf("auto: joining the Nemesis job: %w", err)
	}
	sel, err := auto.Attach(ep, auto.Options{CPUs: p.CPUs, TableOnly: !adaptive})
	if err != nil {
		ep.Close()
		return nil, err
	}
	return &lmtEngine{ep: ep, att: sel.LMT, peer: 1 - p.Proc.Rank, alloc: p.Alloc}, nil
}

// knemDevice checks the KNEM device the module creates.
func knemDevice() error {
	if _, err := os.Stat("/dev/knem"); err != nil {
		return &Unavailable{Backend: lmt.Knem, Reason: "/dev/knem missing",
			Fix: "load the module with modprobe knem (this host's kernel cannot load modules: the module runs only in the QEMU guest of ci/)"}
	}
	return nil
}

// OnEndpoint is the engine between this rank and peer of an endpoint the
// caller joined (a job a PMIx launcher started, lmtbench across nodes),
// with att the LMT attached to it or nil: Send and Recv are the
// endpoint's, whichever path (shared memory or network module) reaches
// peer. Close detaches att and closes the endpoint.
func OnEndpoint(ep *nemesis.Endpoint, att *attach.LMT, peer int) Engine {
	return &lmtEngine{ep: ep, att: att, peer: peer}
}
