package lmt

import (
	"context"

	"golang.org/x/sys/unix"
)

// Progress advances every transfer by at most one chunk and retries
// control packets that found no room. It never blocks.
func (e *Engine) Progress() error {
	if len(e.outbox) > 0 {
		e.flush()
	}
	e.pass++
	for _, t := range e.live {
		if t.grantedIn == e.pass {
			// The receive behind one this pass completed: its
			// user may post the next receive first, whose CTS
			// lets the sender write while this side reads (see
			// channel.leaveReceiver).
			continue
		}
		if t.state != stActive {
			if t.state == stFailing {
				e.quiesce(t)
				continue
			}
			if t.state == stCopied {
				e.fillCopy(t)
				continue
			}
			if t.ch != nil && t.ch.mayFill(t) {
				t.ch.fill(e, t)
			}
			continue
		}
		e.step(t)
	}
	e.sweep()
	return nil
}

// step moves the next chunk of an active transfer.
func (e *Engine) step(t *Transfer) {
	s := t.ch.slot
	end := t.flow.end(t)
	n, err := s.b.Step(t, int(min(int64(s.chunk), end-t.moved)))
	if err != nil {
		e.fail(t, err)
		return
	}
	if n == 0 {
		return
	}
	e.bytes += uint64(n)
	t.advance(n)
	if t.moved == end {
		t.flow.moved(e, t)
	}
}

// Wait drives the Engine (and poll, which should deliver control packets
// to HandleControl) until t completes, and returns its error. It is the
// one wait loop (package internal/await): it spins while payload or
// packets move, yields the CPU after drainSpin idle rounds, and fails for
// what poll reports (a dead peer, which poll's watcher reports with
// PeerFailed), not for time.
func (e *Engine) Wait(t *Transfer, poll func() error) error {
	if t.Done() {
		return t.err
	}
	if err := e.drive(context.Background(), poll, (*transferDone)(t)); err != nil {
		return err
	}
	return t.err
}

// transferDone is a Transfer as the wait loop's condition.
type transferDone Transfer

func (t *transferDone) Done() (bool, error) { return (*Transfer)(t).Done(), nil }

// PollFds appends to dst the descriptors that the active transfers of
// Blocker backends wait for, so that an idle caller can sleep in poll(2)
// until one is ready (with a timeout: control packets arrive elsewhere).
func (e *Engine) PollFds(dst []unix.PollFd) []unix.PollFd {
	for _, t := range e.live {
		if t.state != stActive {
			continue
		}
		if b := t.ch.slot.blocker; b != nil {
			if fd, ev := b.PollFd(t); fd >= 0 {
				dst = append(dst, unix.PollFd{Fd: int32(fd), Events: ev})
			}
		}
	}
	return dst
}

// Drain drives the Engine (and poll, as for Wait) until no send that
// completed with its bytes in a [Buffered] channel still awaits its
// receiver's DONE, or that receiver is reported gone (PeerFailed, which
// poll's watcher calls): a caller about to Close (and its process about
// to exit) calls it first, so that the receiver can read what the send
// promised, as MPI_Finalize delivers every completed send. A receiver that
// lives but never reads holds it, as it would hold MPI_Finalize.
func (e *Engine) Drain(poll func() error) error {
	return e.drive(context.Background(), poll, (*drained)(e))
}

// drained is an Engine as Drain's condition.
type drained Engine

func (d *drained) Done() (bool, error) { return (*Engine)(d).InChannel() == 0, nil }
