// Package vmsplice is the "vmsplice" LMT backend: the sender attaches its
// pages to a pipe with vmsplice(2), the receiver readv()s them into its
// buffer — a single copy, made by the receiver (Buntinas, Goglin, Goodell,
// Mercier, Moreaud, "Cache-Efficient, Intranode, Large-Message MPI
// Communication with MPICH2-Nemesis", ICPP 2009, §3.1). Importing it
// registers the backend with package lmt:
//
//	import _ "github.com/knemesis/knemesis/vmsplice"
//
// Without SPLICE_F_GIFT the pipe only references the sender's pages: were the
// sender to write its buffer before the receiver has read it, the receiver
// would see the new bytes. The backend is therefore not [lmt.Buffered]: a
// send completes only on the receiver's DONE, sent once every byte is out
// of the pipe.
//
// The pipe is sized as for package pipe: the larger the pipe, the more pages
// one vmsplice call attaches and the fewer round trips through the poll loop.
package vmsplice

import (
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/pipe/fifo"
	"golang.org/x/sys/unix"
)

// Name is the backend's name in lmt.Config.Prefer and lmt.Check.
const Name = lmt.Vmsplice

func init() { lmt.Register(Name, newBackend, check) }

type backend struct{ *fifo.Channel }

func newBackend(env *lmt.Env) (lmt.Backend, error) {
	return backend{fifo.NewChannel(Name, env, check)}, nil
}

// Step implements lmt.Backend: pages spliced in, readv out.
func (b backend) Step(t *lmt.Transfer, max int) (int, error) {
	if t.Side() == lmt.Receiver {
		return b.Read(t, max)
	}
	return b.Write(t, max, fifo.Vmsplice)
}

// check is the pipe size check, then a splice of one byte into a fresh
// pipe: seccomp profiles and some sandboxes refuse vmsplice while
// allowing write.
func check(cfg *lmt.Config, peer lmt.Peer) error {
	if err := fifo.CheckSize(Name, cfg); err != nil {
		return err
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return &lmt.Unavailable{Backend: Name, Peer: -1, Err: err, Reason: "cannot create a pipe: " + err.Error()}
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	one := []byte{1}
	iov := []unix.Iovec{{Base: &one[0], Len: 1}}
	if _, err := unix.Vmsplice(p[1], iov, unix.SPLICE_F_NONBLOCK); err != nil {
		return &lmt.Unavailable{Backend: Name, Peer: -1, Err: err, Reason: "vmsplice refused: " + err.Error(),
			Fix: "allow vmsplice in the seccomp profile, or use the pipe backend"}
	}
	return nil
}
