package fifo

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/lmt"
	"golang.org/x/sys/unix"
)

// Backend is the Stream backend over FIFOs shared by packages pipe and
// vmsplice: the receiver readv()s; the sender writev()s (two copies through
// the kernel) or, with Splice, vmsplice()s its pages into the pipe (one
// copy, the receiver's). Spliced pages are referenced, not copied, so the
// sender's buffer stays in use until the receiver's DONE, which the Engine
// waits for before completing the send.
type Backend struct {
	name   string
	splice bool
	env    *lmt.Env
	pipes  *Pipes
	broken []bool // by peer: a pipe holding a failed transfer's leftovers
	chunk  int    // bytes per Step: one pipe-full unless configured
	iov    [1024]unix.Iovec
}

// NewBackend returns a Factory for the named backend.
func NewBackend(name string, splice bool) lmt.Factory {
	return func(env *lmt.Env) (lmt.Backend, error) {
		b := &Backend{name: name, splice: splice, env: env, broken: make([]bool, env.Size)}
		size, _, err := Plan(env.Config.PipeSize, env.Config.MinPipeSize, env.Config.PipeMaxSizePath)
		if err != nil {
			size = 0 // Check reports it; Start refuses
		}
		b.pipes = New(env.Dir, name, env.Rank, env.Size, size)
		b.chunk = env.Config.PipeChunk
		if b.chunk <= 0 {
			b.chunk = max(size, env.Config.Chunk)
		}
		return b, nil
	}
}

// Buffered implements lmt.Buffered: writev copies into the pipe, while
// vmsplice leaves the sender's pages referenced there.
func (b *Backend) Buffered() bool { return !b.splice }

// Ordered implements lmt.Ordered: a pipe is a plain FIFO.
func (b *Backend) Ordered() bool { return true }

// Chunk implements lmt.Chunker: one pipe-full a Step unless
// Config.PipeChunk says otherwise.
func (b *Backend) Chunk() int { return b.chunk }

func (b *Backend) Name() string   { return b.name }
func (b *Backend) Flow() lmt.Flow { return lmt.Stream }

func (b *Backend) Check(peer lmt.Peer) error { return Check(b.name, b.splice, b.env.Config, peer) }

// Check is the availability check of the pipe and vmsplice backends.
func Check(name string, splice bool, cfg *lmt.Config, peer lmt.Peer) error {
	_, _, err := Plan(cfg.PipeSize, cfg.MinPipeSize, cfg.PipeMaxSizePath)
	var ce *CapError
	if errors.As(err, &ce) {
		return &lmt.Unavailable{Backend: name, Peer: -1, Err: err, Reason: err.Error(),
			Fix: fmt.Sprintf("sysctl fs.pipe-max-size=%d, or lower the requested pipe size", ce.Want)}
	}
	if err != nil {
		return &lmt.Unavailable{Backend: name, Peer: -1, Err: err, Reason: err.Error()}
	}
	if splice {
		return probeSplice(name)
	}
	return nil
}

// probeSplice splices one byte into a fresh pipe: seccomp profiles and
// some sandboxes refuse vmsplice while allowing write.
func probeSplice(name string) error {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return &lmt.Unavailable{Backend: name, Peer: -1, Err: err, Reason: "cannot create a pipe: " + err.Error()}
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	one := []byte{1}
	iov := []unix.Iovec{{Base: &one[0], Len: 1}}
	if _, err := unix.Vmsplice(p[1], iov, unix.SPLICE_F_NONBLOCK); err != nil {
		return &lmt.Unavailable{Backend: name, Peer: -1, Err: err, Reason: "vmsplice refused: " + err.Error(),
			Fix: "allow vmsplice in the seccomp profile, or use the pipe backend"}
	}
	return nil
}

func (b *Backend) Handle(t *lmt.Transfer, dst []byte) (int, error) { return 0, nil }
func (b *Backend) SetPeerHandle(t *lmt.Transfer, h []byte) error   { return nil }

func (b *Backend) Start(t *lmt.Transfer) error {
	if b.broken[t.Peer()] {
		return b.leftovers(t.Peer())
	}
	if b.pipes.size == 0 {
		return Check(b.name, b.splice, b.env.Config, lmt.Peer{Rank: t.Peer()})
	}
	var err error
	if t.Side() == lmt.Sender {
		_, err = b.pipes.Writer(t.Peer())
	} else {
		_, err = b.pipes.Reader(t.Peer())
	}
	return err
}

func (b *Backend) Step(t *lmt.Transfer, max int) (int, error) {
	if b.broken[t.Peer()] {
		// A transfer granted ahead, whose bytes would have followed
		// those of the one that failed.
		return 0, b.leftovers(t.Peer())
	}
	iov, _ := t.Iovecs(b.iov[:], max)
	t.CountSyscalls(1)
	if t.Side() == lmt.Receiver {
		n, err := b.pipes.Read(t.Peer(), iov)
		if err == ErrEOF {
			// No writer: not opened yet, or gone.
			return 0, t.CheckPeer()
		}
		return n, err
	}
	fd := b.pipes.writers[t.Peer()]
	var n int
	var err error
	if b.splice {
		n, err = Vmsplice(fd, iov)
	} else {
		n, err = Writev(fd, iov)
	}
	if err == unix.EPIPE {
		if perr := t.CheckPeer(); perr != nil {
			return 0, perr
		}
		return 0, fmt.Errorf("lmt: rank %d closed its %s pipe mid-transfer", t.Peer(), b.name)
	}
	return n, err
}

func (b *Backend) leftovers(peer int) error {
	return fmt.Errorf("lmt: %s pipe with rank %d holds the leftovers of a failed transfer", b.name, peer)
}

// PollFd implements lmt.Blocker.
func (b *Backend) PollFd(t *lmt.Transfer) (int, int16) {
	if t.Side() == lmt.Receiver {
		return b.pipes.readers[t.Peer()], unix.POLLIN
	}
	return b.pipes.writers[t.Peer()], unix.POLLOUT
}

// Abort retires the pipe with t's peer: it may hold half a message, and
// closing our end releases the sender pages a vmsplice left referenced in
// it once the peer's end is gone too. A receiver also removes the FIFO's
// name, which a sender that died before opening it left behind.
func (b *Backend) Abort(t *lmt.Transfer) {
	b.broken[t.Peer()] = true
	b.pipes.Drop(t.Peer())
}

func (b *Backend) Close() error {
	b.pipes.Close()
	return nil
}
