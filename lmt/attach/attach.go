// Package attach plugs the LMT engine into a Nemesis endpoint, so that
// Endpoint.Send and Recv move every message above the eager limit through
// an LMT backend, with no change to the caller's code:
//
//	ep, _ := nemesis.JoinProc(p, nil)
//	l, _ := attach.Attach(ep, attach.Options{})   // shm first, then fallbacks
//	ep.Send(1, tag, big)                         // RTS in the queues, payload via LMT
//
// The endpoint carries the RTS with the message's match information in its
// per-pair order, and the LMT's CTS and DONE as control cells, so matching
// and ordering stay those of eager messages. The engine's Progress runs in
// every Endpoint.Poll: a 1 GiB transfer moves 64 KiB per poll while small
// messages keep arriving.
//
// A backend is forced for the whole endpoint with Options.Prefer, or for one
// message with LMT.Isend or LMT.Isendv.
//
// Scattered buffers stay scattered: a message sent with Endpoint.Isendv or
// received with Endpoint.Irecvv reaches the engine as the caller's iovec
// list (nemesis.Request.Iov), and CMA, pipe, vmsplice and the shm ring each
// move its entries with their own iovec handling (process_vm_readv's iovec
// arrays, vmsplice/readv lists, a gather/scatter copy per ring slot),
// never through an intermediate packed buffer. A list whose non-empty
// entries do not fit a CMA handle (lmt.Config.MaxSegments) goes by another
// backend of the preference list.
package attach

import (
	"errors"
	"time"

	_ "github.com/knemesis/knemesis/cma" // the backends attach wires by default
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	_ "github.com/knemesis/knemesis/shm"
	"golang.org/x/sys/unix"
)

// DefaultEagerMax is the largest message kept on the cell path: MPICH's
// LMT threshold (seed 003, §3.5), clamped to what the endpoint allows.
const DefaultEagerMax = 64 << 10

// Options tune Attach.
type Options struct {
	// EagerMax: messages longer than this go through the LMT (default
	// DefaultEagerMax, at most the endpoint's maximum).
	EagerMax int
	// Prefer overrides the backend preference (lmt.Config.Prefer).
	Prefer []string
	// Tune, when set, adjusts the engine configuration last.
	Tune func(*lmt.Config)
	// Select, when set, is called once per peer rank; the Selector it
	// returns picks the backend of every message to that rank that no
	// Isend forced, and is told how long each one took
	// (threshold.Adaptive is one). Without it the engine takes the first
	// backend of its preference list that works.
	Select func(peer int) Selector
}

// A Selector chooses the backend of each large message to one peer and
// learns from the time each took, sender side, from start to completion.
// Its methods run on the endpoint's goroutine, once per message: they must
// not allocate or block.
type Selector interface {
	// Backend names the backend for a message of size bytes ("" lets
	// the engine choose).
	Backend(size int64) string
	// Observe reports a completed message and how long its payload took
	// to move (lmt.Stats.Moving: without the wait for the receive).
	Observe(backend string, size int64, elapsed time.Duration)
}

// LMT is the nemesis.LMT of one endpoint.
type LMT struct {
	ep  *nemesis.Endpoint
	eng *lmt.Engine
	// forced[dst] lists the sends to dst given a backend by Isend, in
	// send order (sends to one rank start in order).
	forced    [][]forcing
	fds       []unix.PollFd
	selectors []Selector // by peer rank; nil without Options.Select
}

type forcing struct {
	r       *nemesis.Request
	backend string
}

// Attach creates an engine for ep and installs it. Every rank of the job
// must attach before sending its first long message.
func Attach(ep *nemesis.Endpoint, o Options) (*LMT, error) {
	l := &LMT{ep: ep, forced: make([][]forcing, ep.Size())}
	if o.Select != nil {
		l.selectors = make([]Selector, ep.Size())
		for peer := range l.selectors {
			if peer != ep.Rank() {
				l.selectors[peer] = o.Select(peer)
			}
		}
	}
	cfg := lmt.Config{
		Rank: ep.Rank(), Size: ep.Size(), Job: ep.Job(), Control: control{ep},
		PeerPID: func(rank int) int {
			pid, err := ep.PeerPID(rank)
			if err != nil {
				return 0
			}
			return pid
		},
		Prefer:     o.Prefer,
		OnComplete: l.complete,
		OnMeasured: l.observe,
	}
	if o.Tune != nil {
		o.Tune(&cfg)
	}
	eng, err := lmt.New(cfg)
	if err != nil {
		return nil, err
	}
	l.eng = eng
	eager := o.EagerMax
	if eager <= 0 {
		eager = DefaultEagerMax
	}
	if err := ep.SetLMT(l, eager); err != nil {
		eng.Close()
		return nil, err
	}
	return l, nil
}

// spinBeforePoll is how many idle polls pass before a transfer waiting on
// a pipe sleeps in poll(2) on it.
const spinBeforePoll = 16

// livenessEvery is how many idle polls pass between two checks that the
// peer still lives.
const livenessEvery = 4096

// Wait is Endpoint.Wait (which sees the chunks go by through BytesMoved)
// plus what only the engine knows: a transfer waiting on a pipe sleeps in
// poll(2) on it, and the engine checks its peer's pidfd. It spins while
// chunks go through and yields only after nemesis.SpinBeforeYield polls
// that moved nothing, as Endpoint.Wait does. A peer that dies fails the
// wait with a *lmt.PeerError; an eager request left pending then is
// abandoned.
func (l *LMT) Wait(r *nemesis.Request) error {
	idle := 0
	last := l.eng.BytesMoved()
	for {
		done, err := l.ep.Test(r)
		if done || err != nil {
			return err
		}
		if m := l.eng.BytesMoved(); m != last {
			last, idle = m, 0
			continue
		}
		idle++
		// A transfer waiting on a pipe sleeps in poll(2) soon, as a
		// blocking read would: the kernel wakes it when the peer has
		// written or read, and the spinning would only take the CPU
		// from that peer.
		if idle >= spinBeforePoll {
			if l.fds = l.eng.PollFds(l.fds[:0]); len(l.fds) > 0 {
				_, _ = unix.Poll(l.fds, 1)
				continue
			}
		}
		if idle < nemesis.SpinBeforeYield {
			continue
		}
		_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		if idle%livenessEvery == 0 {
			if err := l.eng.CheckPeer(r.Peer()); err != nil {
				return l.peerExited(r, err)
			}
		}
	}
}

// peerExited ends r's wait on a peer whose process exited (err). The peer
// may have sent r's DONE and left at once: what it sent before exiting is
// delivered first, so that r completes if it did, and fails with err if
// not.
func (l *LMT) peerExited(r *nemesis.Request, err error) error {
	for range lmt.ExitGrace { // as many polls as the engine's grace, for the same reason
		if done, terr := l.ep.Test(r); done || terr != nil {
			return terr
		}
	}
	l.eng.PeerFailed(r.Peer(), err)
	if done, terr := l.ep.Test(r); done {
		return terr
	}
	return err
}

// Engine returns the engine (for statistics and availability checks).
func (l *LMT) Engine() *lmt.Engine { return l.eng }

// Close detaches the LMT from the endpoint and releases its backends.
//
// Sends that completed once their bytes were in a buffered channel (shm,
// pipe) may still be on their way: Close first drives the endpoint until
// their receivers have taken them or died, as MPI_Finalize delivers every
// completed send, so that a rank may close and exit right after a send.
func (l *LMT) Close() error {
	_ = l.eng.Drain(l.ep.Poll) // a failing endpoint ends the wait: nothing more can arrive
	l.ep.SetLMT(nil, 0)
	return l.eng.Close()
}

// Isend is Endpoint.Isend with backend forced for this message (when it is
// long enough to go through the LMT at all).
func (l *LMT) Isend(r *nemesis.Request, dst, tag int, buf []byte, backend string) error {
	l.force(dst, r, backend)
	err := l.ep.Isend(r, dst, tag, buf)
	if err != nil || r.Done() {
		l.unforce(dst, r)
	}
	return err
}

// Isendv is Endpoint.Isendv with backend forced for this message (when it
// is long enough to go through the LMT at all).
func (l *LMT) Isendv(r *nemesis.Request, dst, tag int, iov [][]byte, backend string) error {
	l.force(dst, r, backend)
	err := l.ep.Isendv(r, dst, tag, iov)
	if err != nil || r.Done() {
		l.unforce(dst, r)
	}
	return err
}

func (l *LMT) force(dst int, r *nemesis.Request, backend string) {
	if dst >= 0 && dst < len(l.forced) {
		l.forced[dst] = append(l.forced[dst], forcing{r, backend})
	}
}

func (l *LMT) unforce(dst int, r *nemesis.Request) string {
	if dst < 0 || dst >= len(l.forced) {
		return ""
	}
	q := l.forced[dst]
	for i, f := range q {
		if f.r == r {
			// Entries before it are sends that completed without
			// reaching the LMT.
			l.forced[dst] = append(q[:0], q[i+1:]...)
			return f.backend
		}
	}
	return ""
}

// Stats returns the statistics of the transfer carrying r, if r went
// through the LMT and has not been reused.
func Stats(r *nemesis.Request) (lmt.Stats, bool) {
	if t, ok := r.LMTData.(*lmt.Transfer); ok && r.ViaLMT() {
		return t.Stats(), true
	}
	return lmt.Stats{}, false
}

// StartSend implements nemesis.LMT.
func (l *LMT) StartSend(r *nemesis.Request, rts []byte) (int, error) {
	backend := l.unforce(r.Peer(), r)
	if backend == "" && l.selectors != nil {
		if s := l.selectors[r.Peer()]; s != nil {
			backend = s.Backend(int64(r.Len()))
		}
	}
	l.release(r)
	// The request's own list, Isendv's entries as the caller gave them:
	// the engine copies the list (not the bytes) and each backend moves
	// the entries with its native iovec handling, no packing.
	t, n, err := l.eng.StartSend(r.Peer(), r.Iov(), backend, rts)
	if err != nil {
		return 0, err
	}
	t.User, r.LMTData = r, t
	return n, nil
}

// release gives the engine back the transfer that carried r's previous
// message: r is being reused, so Stats(r) no longer needs it, and the
// engine reuses it for this message instead of allocating.
func (l *LMT) release(r *nemesis.Request) {
	// The endpoint keeps LMTData across reuse of the request: this is the
	// transfer of r's last large message, done since r was reusable.
	if old, ok := r.LMTData.(*lmt.Transfer); ok && old.User == r && old.Done() {
		r.LMTData = nil
		_ = l.eng.Release(old) // fails only for a transfer of another engine
	}
}

// StartRecv implements nemesis.LMT.
func (l *LMT) StartRecv(r *nemesis.Request, rts []byte) error {
	l.release(r)
	t, err := l.eng.StartRecv(r.Peer(), rts, r.Iov())
	if err != nil {
		return err
	}
	t.User, r.LMTData = r, t
	if !t.Done() {
		return nil
	}
	// Failed at once (dead peer, no usable backend): OnComplete ran
	// before User was set.
	l.ep.Complete(r, 0, t.Err())
	return nil
}

// HandleControl implements nemesis.LMT.
func (l *LMT) HandleControl(src int, pkt []byte) error { return l.eng.HandleControl(src, pkt) }

// Progress implements nemesis.LMT.
func (l *LMT) Progress() error { return l.eng.Progress() }

// BytesMoved implements nemesis.LMTMeter, so that Endpoint.Wait sees the
// chunks go by.
func (l *LMT) BytesMoved() uint64 { return l.eng.BytesMoved() }

// PeerFailed implements nemesis.LMT.
func (l *LMT) PeerFailed(rank int, err error) { l.eng.PeerFailed(rank, err) }

func (l *LMT) complete(t *lmt.Transfer) {
	r, ok := t.User.(*nemesis.Request)
	if !ok {
		return
	}
	err := t.Err()
	if err == nil && t.Stats().Moving > 0 {
		// A sender on a buffered channel completes before its Moving
		// is known; OnMeasured brings it.
		l.observe(t)
	}
	if errors.Is(err, lmt.ErrTruncated) {
		err = nil // the endpoint reports its own ErrTruncated
	}
	l.ep.Complete(r, int(t.Stats().Bytes), err)
}

// observe tells the peer's selector how long a sent message took to move.
func (l *LMT) observe(t *lmt.Transfer) {
	if t.Side() != lmt.Sender || l.selectors == nil {
		return
	}
	if s := l.selectors[t.Peer()]; s != nil {
		st := t.Stats()
		s.Observe(st.Backend, t.MessageLen(), st.Moving)
	}
}

type control struct{ ep *nemesis.Endpoint }

func (c control) Send(dst int, pkt []byte) (bool, error) { return c.ep.SendControl(dst, pkt) }

var (
	_ nemesis.LMT      = (*LMT)(nil)
	_ nemesis.LMTMeter = (*LMT)(nil)
)
