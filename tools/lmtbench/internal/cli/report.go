package cli

import (
	"fmt"
	"io"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
)

// checkReport refuses --report where the page could not be written or
// would have nothing to show, before anything is measured.
func (o *options) checkReport() error {
	switch {
	case o.report == "":
		return nil
	case o.vm:
		return usagef("--report with --vm: the guest's files vanish when it powers off")
	case o.command == "info" || o.command == "pollution" || o.command == "tune":
		return usagef("--report draws throughput and latency; %s has none to report", o.command)
	}
	return nil
}

// writeReport writes the HTML page of --report, and says where it went.
func (o *options) writeReport(stdout io.Writer, results []report.Result, what string) error {
	if o.report == "" {
		return nil
	}
	f := o.facts()
	path, err := report.WriteHTML(o.report, results, f, fmt.Sprintf("%s on %s, kernel %s", what, f.CPUModel, f.Kernel))
	if err != nil {
		return err
	}
	if !o.machineReadable() {
		fmt.Fprintf(stdout, "report: %s\n", path)
	}
	return nil
}
