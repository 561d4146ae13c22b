// Package pipe registers the "pipe" LMT backend: the sender writev()s its
// buffers into a pipe, the receiver readv()s them out — two copies through
// the kernel, the most portable of the kernel-assisted paths and the slowest
// (the page-cache copy in and out of the pipe buffers).
//
// Import it for its side effect:
//
//	import _ "github.com/knemesis/knemesis/pipe"
//
// The pipe of each ordered pair of ranks is a FIFO in the job's private
// directory, sized with F_SETPIPE_SZ to lmt.Config.PipeSize (1 MiB by default)
// but never beyond /proc/sys/fs/pipe-max-size; below lmt.Config.MinPipeSize
// the backend reports itself unavailable.
package pipe

import (
	"github.com/knemesis/knemesis/internal/fifo"
	"github.com/knemesis/knemesis/lmt"
)

// Name is the backend's name in lmt.Config.Prefer and lmt.Check.
const Name = "pipe"

func init() {
	lmt.Register(4, Name, lmt.Stream, fifo.NewBackend(Name, false), func(cfg *lmt.Config, peer lmt.Peer) error {
		return fifo.Check(Name, false, cfg, peer)
	})
}

// PipeSize returns the capacity the backend will give its pipes under cfg
// and whether pipe-max-size lowered it below cfg.PipeSize.
func PipeSize(cfg lmt.Config) (size int, capped bool, err error) {
	cfg = withDefaults(cfg)
	return fifo.Plan(cfg.PipeSize, cfg.MinPipeSize, cfg.PipeMaxSizePath)
}

func withDefaults(cfg lmt.Config) lmt.Config {
	if cfg.PipeSize <= 0 {
		cfg.PipeSize = lmt.DefaultPipeSize
	}
	if cfg.MinPipeSize <= 0 {
		cfg.MinPipeSize = lmt.DefaultMinPipeSize
	}
	if cfg.PipeMaxSizePath == "" {
		cfg.PipeMaxSizePath = lmt.PipeMaxSizeFile
	}
	return cfg
}
