// Command lmtbench compares the toolkit's transfer backends on this
// machine: which mechanism to use, for which message sizes, and why.
//
//	lmtbench                 machine facts, then the ping-pong sweep 4 KiB–64 MiB
//	lmtbench info            what works here and why the rest does not
//	lmtbench pingpong --backends shm,cma --sizes 4K-1M --json
//
// The same binary is its own worker: the ranks of each measurement job are
// re-executions of it, started through nemesis/launch.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/cli"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/collbench"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/multiseg"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/typedbench"
)

func main() {
	if p, ok := launch.Self(); ok {
		os.Exit(worker(p))
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}

// commandWorkers are the ranks of the commands that run jobs of their
// own, each named by the environment variable carrying its spec.
var commandWorkers = []struct {
	env string
	run func(launch.Proc, io.Writer) error
}{
	{multiseg.EnvSpec, multiseg.Worker},
	{collbench.EnvSpec, collbench.Worker},
	{typedbench.EnvSpec, typedbench.Worker},
}

// worker runs this rank of a job and returns its exit status.
func worker(p launch.Proc) int {
	for _, w := range commandWorkers {
		if os.Getenv(w.env) == "" {
			continue
		}
		if err := w.run(p, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "rank %d: %v\n", p.Rank, err)
			return 1
		}
		return 0
	}
	return harness.Worker(p, os.Stdout, os.Stderr)
}
