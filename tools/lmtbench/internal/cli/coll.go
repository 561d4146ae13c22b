package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/collbench"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/units"
)

// Defaults of lmtbench coll: OSU's range, in powers of four.
const (
	collSizes = "8,64,512,4K,32K,256K,1M,4M,16M"
	collIters = 200
)

// runColl is lmtbench coll: see package collbench.
func runColl(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	list := o.sizes
	if list == "" {
		list = collSizes
	}
	sizes, err := units.ParseList(list, 1)
	if err != nil {
		return usagef("--sizes: %v", err)
	}
	ops, err := collbench.ParseOps(o.backends)
	if err != nil {
		return usageError{err}
	}
	if err := collbench.CheckProcs(o.procs); err != nil {
		return usageError{err}
	}
	peers, err := collbench.ParsePeers(o.peerNames)
	if err != nil {
		return usageError{err}
	}
	allowed, err := machine.AllowedCPUs()
	if err != nil {
		return err
	}
	cfg := collbench.Config{Ops: ops, Peers: peers, Sizes: sizes, Procs: o.procs, Rounds: o.samples, Iters: o.iters, Timeout: o.timeout, Stderr: stderr}
	if cfg.Iters == 0 {
		cfg.Iters = collIters
	}
	if o.cpus != "none" && o.procs <= len(allowed) {
		cfg.CPUs = allowed[:o.procs]
	}
	choices, err := collbench.RunChoices(ctx, cfg)
	if err != nil {
		return err
	}
	rows, err := collbench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	placement := fmt.Sprintf("%d ranks, one per CPU (%v)", o.procs, cfg.CPUs)
	if cfg.Oversubscribed() {
		placement = fmt.Sprintf("oversubscribed: %d ranks on %d CPUs, unpinned, Open MPI yielding when idle", o.procs, len(allowed))
	}
	if o.report != "" {
		f := o.facts()
		path, err := report.WriteCollHTML(o.report, rows, choices, f, fmt.Sprintf("lmtbench coll on %s, kernel %s", f.CPUModel, f.Kernel), placement)
		if err != nil {
			return err
		}
		if !o.machineReadable() {
			defer fmt.Fprintf(stdout, "report: %s\n", path)
		}
	}
	if o.json {
		return json.NewEncoder(stdout).Encode(rows)
	}
	fmt.Fprintf(stdout, "coll: OSU-style latency, the slowest rank's mean per operation, median of %d rounds; %s; operations in turn within each round: knemesis (package coll over knemesis.Join), %s\n", o.samples, placement, strings.Join(peers, ", "))
	for _, l := range choices {
		fmt.Fprintln(stdout, l)
	}
	collbench.Print(stdout, rows)
	return nil
}
