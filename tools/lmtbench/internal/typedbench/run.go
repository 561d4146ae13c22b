package typedbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/knemesis/knemesis/nemesis/launch"
)

// Config is one row pair: Spec's job, bounded by Timeout, its ranks'
// complaints to Stderr.
type Config struct {
	Spec    Spec
	Timeout time.Duration
	Stderr  io.Writer
}

// Run measures cfg in one two-rank job and returns rank 0's samples,
// both variants, in the order they were taken.
func Run(ctx context.Context, cfg Config) ([]Sample, error) {
	js, err := json.Marshal(cfg.Spec)
	if err != nil {
		return nil, err
	}
	// A file, not a buffer: the ranks write it themselves, so that all
	// they wrote is there when launch.Run returns.
	out, err := os.CreateTemp("", "lmtbench-typed-*.json")
	if err != nil {
		return nil, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	err = launch.Run(ctx, launch.Options{
		Procs: 2, Args: []string{}, Env: []string{EnvSpec + "=" + string(js)},
		Timeout: cfg.Timeout, Stdout: out, Stderr: cfg.Stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("%v: %w", cfg.Spec.Shape, err)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		return nil, err
	}
	var samples []Sample
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var s Sample
		if err := json.Unmarshal(line, &s); err != nil || s.Iters < 1 || s.Nanos <= 0 {
			return nil, fmt.Errorf("%v: rank 0 printed %q, want a sample", cfg.Spec.Shape, line)
		}
		samples = append(samples, s)
	}
	if want := cfg.Spec.Rounds * len(Variants); len(samples) != want {
		return nil, fmt.Errorf("%v: rank 0 printed %d samples, want %d", cfg.Spec.Shape, len(samples), want)
	}
	return samples, nil
}
