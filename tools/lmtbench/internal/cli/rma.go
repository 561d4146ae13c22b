package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/engine"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
)

// rmaShapes are the three benchmarks of Ben Fredj and Renault's RWAPI
// paper, in its order: ping-pong (a put, then wait for the peer's put),
// bidirectional ping-pong, and burst.
var rmaShapes = []string{harness.PingPong, harness.Bidir, harness.Stream}

// runRMA measures one-sided op ("put" or "get") in the three shapes, per
// mechanism (the engines op-allocated, op-knem-attach, op-knem, op-cma,
// op-am), through the usual output formats: latency is elapsed time ÷
// messages, throughput messages × size ÷ time, as for every mode.
func runRMA(op string) command {
	return func(ctx context.Context, o *options, stdout, stderr io.Writer) error {
		if o.backends == "" {
			var names []string
			for _, m := range engine.RMAMechanisms {
				b, err := engine.Lookup(op + "-" + m)
				if err != nil {
					return err
				}
				if err := b.Check(); err != nil {
					if !o.machineReadable() {
						fmt.Fprintf(stdout, "not measured: %v\n", err)
					}
					continue
				}
				names = append(names, b.Name)
			}
			o.backends = strings.Join(names, ",")
		}
		for _, shape := range rmaShapes {
			if err := measure(ctx, shape, o, stdout, stderr, false); err != nil {
				return fmt.Errorf("%s %s: %w", op, shape, err)
			}
		}
		return nil
	}
}
