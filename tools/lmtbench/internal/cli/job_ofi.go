//go:build ofi && pmix

package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/netmod/ofi"
	"github.com/knemesis/knemesis/netmod/ofinet"
	"github.com/knemesis/knemesis/netmod/pmix"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
)

func init() { pairInJob = pairAcrossNodes }

// Tags of the job beside the payload's (package engine's): the harness's
// commands between rank 0 and its partner, and rank 0's word to every
// idle rank that the measurement is over.
const (
	ctlTag  = 8
	doneTag = 9
)

// pairAcrossNodes joins the launcher's job through PMIx and libfabric
// (ofinet.Join), attaches the automatic LMT for the node's pairs as an
// application would, and runs the harness between rank 0 and its partner.
func pairAcrossNodes(spec harness.Spec, net netChoice, want int) (*jobRun, error) {
	if net.node == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--node: no host name to bind the network module to (%w); name an address", err)
		}
		net.node = h
	}
	ep, c, err := ofinet.Join(ofinet.Config{Config: ofi.Config{Provider: net.provider, Node: net.node}}, nil)
	if err != nil {
		return nil, fmt.Errorf("joining the launcher's job (provider %s, address %s): %w", net.provider, net.node, err)
	}
	defer c.Finalize()
	partner, err := partnerOf(c, want)
	if err != nil {
		ep.Close()
		return nil, err
	}
	sel, err := auto.Attach(ep, auto.Options{})
	if err != nil {
		ep.Close()
		return nil, fmt.Errorf("attaching the LMT: %w", err)
	}
	other := 0 // the partner's, and the idle ranks' (which send nothing)
	if ep.Rank() == 0 {
		other = partner
	}
	e := engine.OnEndpoint(ep, sel.LMT, other) // Close detaches and closes both
	run, err := pairOn(ep, e, spec, partner)
	return run, errors.Join(err, e.Close())
}

// pairOn is one rank's part: rank 0 leads, its partner follows, the
// others wait for rank 0's done.
func pairOn(ep *nemesis.Endpoint, e engine.Engine, spec harness.Spec, partner int) (*jobRun, error) {
	run := &jobRun{lead: ep.Rank() == 0, partner: partner}
	var err error
	switch ep.Rank() {
	case 0:
		run.path = ep.Path(partner)
		if p, ok := strings.CutPrefix(run.path, "net "); ok {
			run.provider = p
		}
		link := ctlLink{ep: ep, peer: partner}
		err = harness.Pair(spec, e, link, link, 0, func(s harness.Sample) error {
			run.samples = append(run.samples, s)
			return nil
		})
		for r := 1; r < ep.Size() && err == nil; r++ {
			if r != partner {
				err = ep.Send(r, doneTag, nil)
			}
		}
	case partner:
		link := ctlLink{ep: ep, peer: 0}
		err = harness.Pair(spec, e, link, link, 1, nil)
	default:
		err = ofinet.Idle(ep, 0, doneTag)
	}
	return run, err
}

// partnerOf is rank 0's partner: want when it names another rank of the
// job, else the first rank on another node than rank 0's, else rank 1.
// Every rank computes it alike, from the same PMIx data.
func partnerOf(c *pmix.Client, want int) (int, error) {
	size := c.Size()
	if size < 2 {
		return 0, usagef("a job of 1 rank has no pair to measure: start 2 or more (mpirun -np 3 ...)")
	}
	if want >= 0 {
		if want == 0 || want >= size {
			return 0, usagef("--peer %d: want a rank from 1 to %d of this job of %d", want, size-1, size)
		}
		return want, nil
	}
	n0, err := c.NodeOf(0)
	if err != nil {
		return 0, err
	}
	for r := 1; r < size; r++ {
		n, err := c.NodeOf(r)
		if err != nil {
			return 0, err
		}
		if n != n0 {
			return r, nil
		}
	}
	return 1, nil
}

// ctlLink carries the harness's commands between the pair as messages of
// their own tag: one record per Write and per Read.
type ctlLink struct {
	ep   *nemesis.Endpoint
	peer int
}

func (l ctlLink) Write(p []byte) (int, error) {
	if err := l.ep.Send(l.peer, ctlTag, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (l ctlLink) Read(p []byte) (int, error) {
	st, err := l.ep.Recv(l.peer, ctlTag, p)
	if err != nil {
		return 0, err
	}
	return st.Len, nil
}
