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
	"os"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/cli"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/harness"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/multiseg"
)

func main() {
	if p, ok := launch.Self(); ok {
		if os.Getenv(multiseg.EnvSpec) != "" {
			if err := multiseg.Worker(p, os.Stdout); err != nil {
				fmt.Fprintf(os.Stderr, "rank %d: %v\n", p.Rank, err)
				os.Exit(1)
			}
			os.Exit(0)
		}
		os.Exit(harness.Worker(p, os.Stdout, os.Stderr))
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
