package cli

import (
	"context"
	"io"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/report"
)

// runTable prints the Markdown tables of an earlier --json run: the
// results tables of README.md and docs/performance.md are its output.
func runTable(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	if o.from == "" {
		return usagef("table needs --from FILE.json, the output of an lmtbench --json run")
	}
	rs, err := report.ReadJSON(o.from)
	if err != nil {
		return err
	}
	return report.WriteMarkdown(stdout, rs)
}
