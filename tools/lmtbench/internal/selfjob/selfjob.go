// Package selfjob runs the two-rank jobs of the lmtbench commands that
// measure inside one job of their own (multiseg, vector, indexed): the
// parent starts this executable twice with the command's spec as JSON in
// an environment variable, and each rank reads it back, pins itself and
// joins its endpoint.
package selfjob

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/tools/lmtbench/internal/machine"
)

// Run starts a two-rank job of this executable with spec, as JSON, in
// environment variable env, and returns what rank 0 wrote to its standard
// output. timeout bounds the job; the ranks' complaints go to stderr.
func Run(ctx context.Context, env string, spec any, timeout time.Duration, stderr io.Writer) ([]byte, error) {
	return RunProcs(ctx, env, spec, 2, timeout, stderr)
}

// RunProcs is Run for a job of procs ranks.
func RunProcs(ctx context.Context, env string, spec any, procs int, timeout time.Duration, stderr io.Writer) ([]byte, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	// A file, not a buffer: the ranks write it themselves, so that all
	// they wrote is there when launch.Run returns.
	out, err := os.CreateTemp("", "lmtbench-job-*.json")
	if err != nil {
		return nil, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	err = launch.Run(ctx, launch.Options{
		Procs: procs, Args: []string{}, Env: []string{env + "=" + string(js)},
		Timeout: timeout, Stdout: out, Stderr: stderr,
	})
	if err != nil {
		return nil, err
	}
	return os.ReadFile(out.Name())
}

// ReadSpec reads the spec of a rank of such a job from env into spec.
func ReadSpec(env string, spec any) error {
	if err := json.Unmarshal([]byte(os.Getenv(env)), spec); err != nil {
		return fmt.Errorf("reading %s: %w", env, err)
	}
	return nil
}

// Join pins rank p to its CPU of cpus (nil: unpinned), locks the calling
// goroutine to its thread, and joins the rank's endpoint, the caller's
// to close.
func Join(p launch.Proc, cpus []int) (*nemesis.Endpoint, error) {
	runtime.LockOSThread()
	if cpus != nil {
		if err := machine.PinProcess(cpus[p.Rank]); err != nil {
			return nil, err
		}
	}
	return nemesis.JoinProc(p, nil)
}
