// Package pipe is the "pipe" LMT backend: the sender writev()s its buffers
// into a pipe, the receiver readv()s them out — two copies through the
// kernel, the most portable of the kernel-assisted paths and the slowest
// (the copy in and out of the pipe buffers). Importing it registers the
// backend with package lmt:
//
//	import _ "github.com/knemesis/knemesis/pipe"
//
// The pipe of each ordered pair of ranks is a FIFO in the job's private
// directory (package pipe/fifo), sized with F_SETPIPE_SZ to Settings.Size
// (1 MiB by default) but never beyond /proc/sys/fs/pipe-max-size; below
// Settings.MinSize the backend reports itself unavailable. Its settings
// go in lmt.Config.Backends.
//
// writev copies the sender's bytes into the pipe, so a send completes
// once its last byte is in ([lmt.Buffered]), without waiting for the
// receiver to read it, as a writer of a pipe would.
package pipe

import (
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/pipe/fifo"
)

// Name is the backend's name in lmt.Config.Prefer and lmt.Check.
const Name = lmt.Pipe

func init() { lmt.Register(Name, newBackend, check) }

type backend struct{ *fifo.Channel }

func newBackend(env *lmt.Env) (lmt.Backend, error) {
	return backend{fifo.NewChannel(Name, env, check)}, nil
}

func check(cfg *lmt.Config, peer lmt.Peer) error { return fifo.CheckSize(Name, cfg) }

// Step implements lmt.Backend: writev in, readv out.
func (b backend) Step(t *lmt.Transfer, max int) (int, error) {
	if t.Side() == lmt.Receiver {
		return b.Read(t, max)
	}
	return b.Write(t, max, fifo.Writev)
}

// Buffered implements lmt.Buffered: the pipe holds a copy of what writev
// put in.
func (b backend) Buffered() bool { return true }

// Settings are the pipe backend's own, which vmsplice shares: pipe sizes
// and the chunk one Step moves (see fifo.Settings).
type Settings = fifo.Settings

// PipeSize returns the capacity the backend will give its pipes under cfg
// and whether pipe-max-size lowered it below its Settings.Size.
func PipeSize(cfg lmt.Config) (size int, capped bool, err error) {
	return fifo.PlanSize(&cfg)
}
