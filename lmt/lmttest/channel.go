// Package lmttest runs LMT engines across the processes of a test job, with
// a control channel of SOCK_SEQPACKET socket pairs standing in for the
// Nemesis queues, and provides the transfer matrix every backend's tests run.
//
//	job := lmttest.NewJob(2)
//	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup}, func(p launch.Proc) error {
//		ch, err := lmttest.Connect(p)  // one socket per peer, PIDs exchanged
//		...
//		eng, err := lmt.New(ch.Config(p))
//	})
package lmttest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"golang.org/x/sys/unix"
)

// Envelope bytes in front of every packet on the test channel.
const (
	tagHello = 'H'
	tagRTS   = 'R'
	tagCtl   = 'C'
	tagMsg   = 'M'
)

// Job makes the socket pairs of one test job in the parent; Setup hands each
// rank its ends as extra files 3, 4, ... in the order of its peers' ranks.
type Job struct {
	n     int
	pairs [][]*os.File // pairs[i][j]: rank i's end of the (i,j) socket
	// Extra, when set, adjusts each rank's command after the sockets
	// are attached (namespaces, credentials).
	Extra func(rank int, cmd *exec.Cmd) error
}

// NewJob prepares a job of n ranks.
func NewJob(n int) *Job { return &Job{n: n} }

// Setup is a launch Options.Setup.
func (j *Job) Setup(rank int, cmd *exec.Cmd) error {
	if j.pairs == nil {
		j.pairs = make([][]*os.File, j.n)
		for i := range j.pairs {
			j.pairs[i] = make([]*os.File, j.n)
		}
		for i := 0; i < j.n; i++ {
			for k := i + 1; k < j.n; k++ {
				fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
				if err != nil {
					return err
				}
				j.pairs[i][k] = os.NewFile(uintptr(fds[0]), fmt.Sprintf("ctl-%d-%d", i, k))
				j.pairs[k][i] = os.NewFile(uintptr(fds[1]), fmt.Sprintf("ctl-%d-%d", k, i))
			}
		}
	}
	for k := 0; k < j.n; k++ {
		if k != rank {
			cmd.ExtraFiles = append(cmd.ExtraFiles, j.pairs[rank][k])
		}
	}
	if j.Extra != nil {
		return j.Extra(rank, cmd)
	}
	return nil
}

// Channel is one rank's end of the test control network. It implements
// lmt.Control.
type Channel struct {
	Rank, Size int
	// Engine gets the packets tagged for the LMT (HandleControl) and a
	// peer's death (PeerFailed), as from a Nemesis endpoint: Poll watches
	// the peers' processes (see watch.go) and delivers everything a dead
	// peer sent before it reports the death, so a DONE sent just before
	// an exit completes its transfer first.
	Engine *lmt.Engine

	fds  []int // by rank; -1 for self and closed sockets
	pids []int
	watcher
	rts  [][][]byte
	msgs [][][]byte
	buf  []byte
	out  []byte
}

// Connect opens this rank's sockets (from Job.Setup) and exchanges process
// ids with every peer.
func Connect(p launch.Proc) (*Channel, error) {
	fds := make([]int, p.Size)
	fd := 3
	for k := range fds {
		fds[k] = -1
		if k != p.Rank {
			fds[k] = fd
			fd++
		}
	}
	return NewChannel(p, fds)
}

// NewChannel is Connect with the socket of each peer given (fds[rank], -1
// for this rank).
func NewChannel(p launch.Proc, fds []int) (*Channel, error) {
	c := &Channel{Rank: p.Rank, Size: p.Size, fds: fds, pids: make([]int, p.Size),
		rts: make([][][]byte, p.Size), msgs: make([][][]byte, p.Size), buf: make([]byte, 1<<16), out: make([]byte, 1<<16)}
	c.pids[p.Rank] = os.Getpid()
	var hello [9]byte
	hello[0] = tagHello
	putInt(hello[1:], os.Getpid())
	for k, fd := range c.fds {
		if fd >= 0 {
			if err := unix.Send(fd, hello[:], 0); err != nil {
				return nil, fmt.Errorf("hello to rank %d: %w", k, err)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for !c.allHellos() {
		if time.Now().After(deadline) {
			return nil, errors.New("lmttest: no hello from every peer within 30s")
		}
		if err := c.Poll(); err != nil {
			return nil, err
		}
	}
	c.watcher.open(c.pids, c.Rank)
	return c, nil
}

func (c *Channel) allHellos() bool {
	for _, pid := range c.pids {
		if pid == 0 {
			return false
		}
	}
	return true
}

// Config returns an lmt.Config wired to this channel.
func (c *Channel) Config(p launch.Proc) lmt.Config {
	return lmt.Config{Rank: p.Rank, Size: p.Size, Job: p.Job, Control: c, PeerPID: c.PeerPID}
}

// PeerPID returns the process id rank announced.
func (c *Channel) PeerPID(rank int) int { return c.pids[rank] }

// Send implements lmt.Control.
func (c *Channel) Send(dst int, pkt []byte) (bool, error) {
	return c.send(dst, tagCtl, pkt)
}

func (c *Channel) send(dst int, tag byte, pkt []byte) (bool, error) {
	if c.fds[dst] < 0 {
		return false, fmt.Errorf("lmttest: channel to rank %d is closed", dst)
	}
	c.out[0] = tag
	n := copy(c.out[1:], pkt)
	err := unix.Send(c.fds[dst], c.out[:1+n], unix.MSG_DONTWAIT)
	if err == unix.EAGAIN {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lmttest: sending to rank %d: %w", dst, err)
	}
	return true, nil
}

// SendRTS sends an RTS (or any message the test matches itself) to dst,
// driving the engine while the socket is full.
func (c *Channel) SendRTS(dst int, rts []byte) error { return c.sendBlocking(dst, tagRTS, rts) }

// SendMsg sends a small application message to dst.
func (c *Channel) SendMsg(dst int, msg []byte) error { return c.sendBlocking(dst, tagMsg, msg) }

func (c *Channel) sendBlocking(dst int, tag byte, pkt []byte) error {
	for {
		ok, err := c.send(dst, tag, pkt)
		if err != nil || ok {
			return err
		}
		if err := c.Step(); err != nil {
			return err
		}
	}
}

// Poll delivers everything that arrived: LMT packets to the engine, RTS and
// messages to their queues.
func (c *Channel) Poll() error {
	for src := range c.fds {
		if err := c.receive(src); err != nil {
			return err
		}
	}
	return c.watch()
}

// receive delivers what waits on src's socket.
func (c *Channel) receive(src int) error {
	fd := c.fds[src]
	if fd < 0 {
		return nil
	}
	for {
		n, _, err := unix.Recvfrom(fd, c.buf, unix.MSG_DONTWAIT)
		if err == unix.EAGAIN || err == unix.EINTR {
			return nil
		}
		if err != nil || n == 0 {
			unix.Close(fd)
			c.fds[src] = -1
			if c.Engine != nil {
				c.Engine.PeerFailed(src, errors.New("control socket closed"))
			}
			return nil
		}
		if err := c.dispatch(src, c.buf[:n]); err != nil {
			return err
		}
	}
}

func (c *Channel) dispatch(src int, p []byte) error {
	body := p[1:]
	switch p[0] {
	case tagHello:
		c.pids[src] = getInt(body)
	case tagCtl:
		if c.Engine == nil {
			return fmt.Errorf("lmttest: LMT packet from rank %d before the engine exists", src)
		}
		return c.Engine.HandleControl(src, body)
	case tagRTS:
		c.rts[src] = append(c.rts[src], append([]byte(nil), body...))
	case tagMsg:
		c.msgs[src] = append(c.msgs[src], append([]byte(nil), body...))
	default:
		return fmt.Errorf("lmttest: unknown envelope %q from rank %d", p[0], src)
	}
	return nil
}

// Await waits until a packet from src is waiting on its socket, without
// taking it: a test can act between a packet's arrival and the engine seeing
// it (die after a CTS, before opening the channel it announces).
func (c *Channel) Await(src int, timeout time.Duration) error {
	if c.fds[src] < 0 {
		return fmt.Errorf("lmttest: channel to rank %d is closed", src)
	}
	pfd := []unix.PollFd{{Fd: int32(c.fds[src]), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, int(timeout.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("lmttest: no packet from rank %d within %v", src, timeout)
		}
		return nil
	}
}

// Step polls the channel and progresses the engine once.
func (c *Channel) Step() error {
	if err := c.Poll(); err != nil {
		return err
	}
	if c.Engine != nil {
		return c.Engine.Progress()
	}
	return nil
}

// NextRTS returns the next RTS from src, driving everything until it comes
// (or until src's socket closes).
func (c *Channel) NextRTS(src int) ([]byte, error) { return c.next(c.rts, src) }

// NextMsg returns the next small message from src.
func (c *Channel) NextMsg(src int) ([]byte, error) { return c.next(c.msgs, src) }

// TryMsg returns the next small message from src if one has arrived.
func (c *Channel) TryMsg(src int) ([]byte, bool) {
	if len(c.msgs[src]) == 0 {
		return nil, false
	}
	m := c.msgs[src][0]
	c.msgs[src] = c.msgs[src][1:]
	return m, true
}

func (c *Channel) next(q [][][]byte, src int) ([]byte, error) {
	for len(q[src]) == 0 {
		if c.fds[src] < 0 {
			return nil, fmt.Errorf("lmttest: rank %d closed its channel", src)
		}
		if err := c.Step(); err != nil {
			return nil, err
		}
	}
	m := q[src][0]
	q[src] = q[src][1:]
	return m, nil
}

// Wait drives channel and engine until t completes. While t still moves
// bytes it tells launchtest's watchdog so (at most once a second): a
// 256 MiB transfer on a machine that other jobs load may take minutes, and
// is progress, not a stall.
func (c *Channel) Wait(t *lmt.Transfer) error {
	moved, next := t.Moved(), time.Now().Add(time.Second)
	return c.Engine.Wait(t, func() error {
		if now := time.Now(); now.After(next) {
			if m := t.Moved(); m != moved {
				moved = m
				launchtest.Progress()
			}
			next = now.Add(time.Second)
		}
		return c.Poll()
	})
}

// Close drains the engine (lmt.Engine.Drain: sends on shm and pipe complete
// while their bytes are still in the channel) and closes it, so that a rank
// may return right after its last send.
func (c *Channel) Close() error {
	err := c.Engine.Drain(c.Poll)
	if cerr := c.Engine.Close(); err == nil {
		err = cerr
	}
	c.closeWatch()
	return err
}

// Barrier waits until every rank has reached it (messages "B").
func (c *Channel) Barrier() error {
	for k := range c.fds {
		if k != c.Rank {
			if err := c.SendMsg(k, []byte("barrier")); err != nil {
				return err
			}
		}
	}
	for k := range c.fds {
		if k != c.Rank {
			m, err := c.NextMsg(k)
			if err != nil {
				return err
			}
			if string(m) != "barrier" {
				return fmt.Errorf("lmttest: rank %d sent %q where a barrier was due", k, m)
			}
		}
	}
	return nil
}

func putInt(b []byte, v int) {
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

func getInt(b []byte) int {
	v := 0
	for i := 0; i < 8 && i < len(b); i++ {
		v |= int(b[i]) << (8 * i)
	}
	return v
}
