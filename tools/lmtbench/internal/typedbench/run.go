package typedbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/knemesis/knemesis/tools/lmtbench/internal/selfjob"
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
	b, err := selfjob.Run(ctx, EnvSpec, cfg.Spec, cfg.Timeout, cfg.Stderr)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", cfg.Spec.Shape, err)
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
