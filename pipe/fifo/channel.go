package fifo

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
	"golang.org/x/sys/unix"
)

// Channel is what the pipe and vmsplice backends share as lmt Stream
// backends: one FIFO per ordered pair of ranks, opened by the receiver's
// Start before its CTS and by the sender's at the CTS, read with readv,
// retired when a transfer fails in it. Each backend's package adds how
// its sender writes (writev, vmsplice), its availability check, and
// whether its channel holds a copy of what was written.
//
// A pipe is a plain FIFO, so a Channel is [lmt.Ordered]: senders push
// whole messages in the order of the receiver's CTSs.
type Channel struct {
	name   string
	env    *lmt.Env
	check  lmt.Prober
	pipes  *Pipes
	dir    string
	broken []bool // by peer: a pipe holding a failed transfer's leftovers
	// closedAt is, by peer, when a write first found the pipe closed
	// by its reader (zero: not found so); see Write.
	closedAt []time.Time
	chunk    int // bytes per Step: one pipe-full unless configured
	iov      [1024]unix.Iovec
}

// NewChannel prepares the FIFOs of backend name for env's engine, in
// Dir(env), sized as
// the Config asks within the system's cap. check is the backend's
// availability check, which Start repeats when the pipe size was refused.
func NewChannel(name string, env *lmt.Env, check lmt.Prober) *Channel {
	c := &Channel{name: name, env: env, check: check, dir: Dir(env), broken: make([]bool, env.Size), closedAt: make([]time.Time, env.Size)}
	size, _, err := PlanSize(env.Config)
	if err != nil {
		size = 0 // Check reports it; Start refuses
	}
	c.pipes = New(c.dir, name, env.Rank, env.Size, size)
	if c.dir != jobDir(env) {
		c.pipes.parent = jobDir(env)
	}
	c.chunk = settingsOf(env.Config).Chunk
	if c.chunk <= 0 {
		c.chunk = max(size, env.Config.Chunk)
	}
	return c
}

// Dir is the directory of the FIFOs of env's job: in the job's private
// directory (env.Dir, by default launch.JobDir, which launch.Run removes
// however the ranks end), a directory named from the job's key when it
// has one, so that no process outside the job can tell where its FIFOs
// are, or make that directory first. A job without a key has its FIFOs in
// the job's directory itself, named after the job.
func Dir(env *lmt.Env) string {
	if env.Key.IsZero() {
		return jobDir(env)
	}
	return filepath.Join(jobDir(env), "fifo-"+env.Key.Name("lmt/fifo"))
}

func jobDir(env *lmt.Env) string {
	if env.Dir != "" {
		return env.Dir
	}
	return launch.JobDir(env.Job)
}

// Ordered implements lmt.Ordered: a pipe is a plain FIFO.
func (c *Channel) Ordered() bool { return true }

// Datatypes implements lmt.Datatyped: readv, writev and vmsplice take
// t.Iovecs, which lists a datatype description's blocks (a run of its
// small ones as one entry of its staging buffer), and the handle names
// nothing.
func (c *Channel) Datatypes() bool { return true }

// Chunk implements lmt.Chunker: one pipe-full a Step unless
// Settings.Chunk says otherwise.
func (c *Channel) Chunk() int { return c.chunk }

// Check implements lmt.Backend.
func (c *Channel) Check(peer lmt.Peer) error { return c.check(c.env.Config, peer) }

// CheckSize reports whether the pipe size cfg asks for is possible under
// the system's cap, as an *lmt.Unavailable of backend name.
func CheckSize(name string, cfg *lmt.Config) error {
	_, _, err := PlanSize(cfg)
	var ce *CapError
	if errors.As(err, &ce) {
		return &lmt.Unavailable{Backend: name, Peer: -1, Err: err, Reason: err.Error(),
			Fix: fmt.Sprintf("sysctl fs.pipe-max-size=%d, or lower the requested pipe size", ce.Want)}
	}
	if err != nil {
		return &lmt.Unavailable{Backend: name, Peer: -1, Err: err, Reason: err.Error()}
	}
	return nil
}

// Handle implements lmt.Backend: a stream sends no handle.
func (c *Channel) Handle(t *lmt.Transfer, dst []byte) (int, error) { return 0, nil }

// SetPeerHandle implements lmt.Backend.
func (c *Channel) SetPeerHandle(t *lmt.Transfer, h []byte) error { return nil }

// Start implements lmt.Backend: the receiver creates and opens the FIFO's
// read end before its CTS, the sender opens the write end at the CTS.
func (c *Channel) Start(t *lmt.Transfer) error {
	if c.broken[t.Peer()] {
		return c.leftovers(t.Peer())
	}
	if c.pipes.size == 0 {
		return c.Check(lmt.Peer{Rank: t.Peer()})
	}
	var err error
	if t.Side() == lmt.Sender {
		_, err = c.pipes.Writer(t.Peer())
	} else {
		_, err = c.pipes.Reader(t.Peer())
	}
	return err
}

// Read is the receiver's Step: readv from the pipe into t's buffers.
func (c *Channel) Read(t *lmt.Transfer, max int) (int, error) {
	if c.broken[t.Peer()] {
		// A transfer granted ahead, whose bytes would have followed
		// those of the one that failed.
		return 0, c.leftovers(t.Peer())
	}
	iov, _ := t.Iovecs(c.iov[:], max)
	t.CountSyscalls(1)
	n, err := c.pipes.Read(t.Peer(), iov)
	if err == ErrEOF {
		// No writer: not opened yet, or gone.
		return 0, t.CheckPeer()
	}
	return n, err
}

// Write is the sender's Step: write (Writev or Vmsplice) t's buffers into
// the pipe.
func (c *Channel) Write(t *lmt.Transfer, max int, write func(fd int, iov []unix.Iovec) (int, error)) (int, error) {
	if c.broken[t.Peer()] {
		return 0, c.leftovers(t.Peer())
	}
	iov, _ := t.Iovecs(c.iov[:], max)
	t.CountSyscalls(1)
	n, err := write(c.pipes.writers[t.Peer()], iov)
	if err == unix.EPIPE {
		return 0, c.closed(t)
	}
	return n, err
}

// readerGrace bounds how long a writer waits, after its reader closed the
// pipe, for the reason to show: the reader's exit, or its failed DONE.
const readerGrace = time.Second

// closed is a write's answer to a pipe its reader closed mid-transfer.
// A reader that dies closes its files before its exit shows on its
// pidfd, and one that gave up on the transfer sends a failed DONE after
// closing the pipe (Abort): either reaches this side in far less than
// readerGrace, the transfer then failing with a PeerError or the
// reader's own error instead of this one. Until then the write moves
// nothing; past it, the reader is alive and said nothing.
func (c *Channel) closed(t *lmt.Transfer) error {
	if perr := t.CheckPeer(); perr != nil {
		return perr
	}
	at := &c.closedAt[t.Peer()]
	if at.IsZero() {
		*at = time.Now()
	}
	if time.Since(*at) < readerGrace {
		return nil
	}
	return fmt.Errorf("lmt: rank %d closed its %s pipe mid-transfer", t.Peer(), c.name)
}

func (c *Channel) leftovers(peer int) error {
	return fmt.Errorf("lmt: %s pipe with rank %d holds the leftovers of a failed transfer", c.name, peer)
}

// PollFd implements lmt.Blocker.
func (c *Channel) PollFd(t *lmt.Transfer) (int, int16) {
	if t.Side() == lmt.Receiver {
		return c.pipes.readers[t.Peer()], unix.POLLIN
	}
	return c.pipes.writers[t.Peer()], unix.POLLOUT
}

// Abort implements lmt.Backend. It retires the pipe with t's peer: it may
// hold half a message, and closing our end releases the sender pages a
// vmsplice left referenced in it once the peer's end is gone too. A
// receiver also removes the FIFO's name, which a sender that died before
// opening it left behind.
func (c *Channel) Abort(t *lmt.Transfer) {
	c.broken[t.Peer()] = true
	c.closedAt[t.Peer()] = time.Time{}
	c.pipes.Drop(t.Peer())
}

// Close implements lmt.Backend. The last rank out removes the job's
// directory, once empty.
func (c *Channel) Close() error {
	c.pipes.Close()
	unix.Rmdir(c.dir)
	if c.pipes.parent != "" {
		unix.Rmdir(c.pipes.parent)
	}
	return nil
}
