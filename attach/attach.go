// Package attach plugs the LMT engine into a Nemesis endpoint, so that
// Endpoint.Send and Recv move every message above the eager limit through
// an LMT backend, with no change to the caller's code. It is the layer for
// callers who choose backends themselves; knemesis.Join (the root package)
// adds the automatic choice (package auto) in one call.
//
//	ep, _ := nemesis.JoinProc(p, nil)
//	l, _ := attach.Attach(ep, attach.Options{})   // shm first, then fallbacks
//	ep.Send(1, tag, big)                         // RTS in the queues, payload via LMT
//
// Attach wires the shm and CMA backends (imported here); import pipe,
// vmsplice or kmod/knem/knemlmt for theirs.
//
// The endpoint stays the one place that waits and that watches the peers:
// Endpoint.Wait sleeps in poll(2) on the pipes transfers wait for (the LMT
// is a nemesis.LMTPoller), and the endpoint's pidfd watch fails the
// engine's transfers with a dead peer through PeerFailed.
//
// The endpoint carries the RTS with the message's match information in its
// per-pair order, and the LMT's CTS and DONE as control cells, so matching
// and ordering stay those of eager messages. The engine's Progress runs in
// every Endpoint.Poll: a 1 GiB transfer moves 64 KiB per poll while small
// messages keep arriving.
//
// A backend is forced for the whole endpoint with Options.Prefer, or for one
// message with LMT.Isend or LMT.Isendv, which carry it on the request to
// the engine.
//
// A message whose send buffers lie in the job's shared arena
// (nemesis.Endpoint.Alloc), longer than a fastbox's payload, does not reach
// the engine: the endpoint sends a descriptor and the receiver copies it
// once, out of the sender's buffer, with no system call and no rendezvous
// (nemesis.LMTArena). The LMT takes it only when a backend was forced on
// the message (LMT.Isend) or Options.Prefer names the arena backend (as
// `lmtbench --backends arena` does, to compare the two); it then goes by
// the arena backend (package arena), whatever the selector would say, or
// by the forced backend.
//
// Scattered buffers stay scattered: a message sent with Endpoint.Isendv or
// received with Endpoint.Irecvv reaches the engine as the caller's iovec
// list (nemesis.Request.Iov), and CMA, pipe, vmsplice and the shm ring each
// move its entries with their own iovec handling (process_vm_readv's iovec
// arrays, vmsplice/readv lists, a gather/scatter copy per ring slot),
// never through an intermediate packed buffer. A list whose non-empty
// entries do not fit a CMA handle (lmt.Config.MaxSegments) goes by another
// backend of the preference list. A message sent or received with a
// derived datatype (Endpoint.IsendType, IrecvType) reaches the engine as
// its description (StartSendType, StartRecvType), for a CMA backend, or a
// stream one when no CMA backend can take it (lmt.Datatyped).
package attach

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	_ "github.com/knemesis/knemesis/arena" // the backends attach wires by default
	_ "github.com/knemesis/knemesis/cma"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/netmod/netread" // ranks on other nodes
	_ "github.com/knemesis/knemesis/shm"
	"golang.org/x/sys/unix"
)

// DefaultEagerMax is the largest message kept on the cell path: MPICH's
// LMT threshold (Buntinas et al., ICPP 2009, §3.5).
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
	// to move (lmt.Stats.Moving: without the wait for the receive); up to
	// the eager limit, where the LMT competes with eager sends, its whole
	// time on the sender (lmt.Stats.Elapsed: rendezvous included).
	Observe(backend string, size int64, elapsed time.Duration)
}

// An EagerChooser is a Selector that also decides whether each message up
// to the eager limit goes eagerly, and learns from the time those took
// (package auto's selectors, over a threshold.Learner). It is asked only
// for the sizes [LMT.SetEagerRange] opens to it.
type EagerChooser interface {
	Selector
	// Eager reports whether a message of size bytes goes by the cells.
	Eager(size int64) bool
	// ObserveEager reports a message sent eagerly and how long its copy
	// into the cells took, sender side.
	ObserveEager(size int64, elapsed time.Duration)
}

// LMT is the nemesis.LMT of one endpoint.
type LMT struct {
	ep        *nemesis.Endpoint
	eng       *lmt.Engine
	eagerMax  int
	selectors []Selector // by peer rank; nil without Options.Select
	// choosers are the selectors that are EagerChoosers, by peer rank;
	// they decide for messages of more than chooseAbove bytes.
	choosers    []EagerChooser
	chooseAbove int
	// arenaLMT: Options.Prefer names the arena backend, so arena
	// buffers go by it rather than the endpoint's single copy.
	arenaLMT bool
}

// request is the LMT's state on a nemesis.Request (its LMTData): the
// backend an Isend forced for its message, and the transfer that carried
// its last large message. It is allocated once per Request and kept
// across the request's reuse.
type request struct {
	backend string
	t       *lmt.Transfer
}

// stateOf returns r's LMT state, allocating it on r's first large message.
func stateOf(r *nemesis.Request) *request {
	if s, ok := r.LMTData.(*request); ok {
		return s
	}
	s := &request{}
	r.LMTData = s
	return s
}

// Attach creates an engine for ep and installs it. Every rank of the job
// must attach before sending its first long message.
func Attach(ep *nemesis.Endpoint, o Options) (*LMT, error) {
	l := &LMT{ep: ep, chooseAbove: math.MaxInt, arenaLMT: slices.Contains(o.Prefer, lmt.Arena)}
	if o.Select != nil {
		l.selectors = make([]Selector, ep.Size())
		l.choosers = make([]EagerChooser, ep.Size())
		for peer := range l.selectors {
			// A remote rank has one backend, net-read: nothing to select.
			if peer != ep.Rank() && !ep.Remote(peer) {
				l.selectors[peer] = o.Select(peer)
				l.choosers[peer], _ = l.selectors[peer].(EagerChooser)
			}
		}
	}
	cfg := lmt.Config{
		Rank: ep.Rank(), Size: ep.Size(), Job: ep.Job(), Key: ep.JobKey(), Control: control{ep},
		PeerPID: func(rank int) int {
			pid, err := ep.PeerPID(rank)
			if err != nil {
				return 0
			}
			return pid
		},
		Arena:      ep.ArenaRegion,
		Alloc:      ep.Alloc,
		Prefer:     o.Prefer,
		OnComplete: l.complete,
		OnMeasured: l.observe,
	}
	if ep.NetModule() != nil {
		cfg.Remote = ep.Remote
		cfg.Backends = append(cfg.Backends, netread.Settings{Net: ep})
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
	l.eagerMax = eager
	if err := ep.SetLMT(l, eager); err != nil {
		eng.Close()
		return nil, err
	}
	return l, nil
}

// SetEagerRange sets the endpoint's eager limit to eagerMax and lets each
// peer's EagerChooser decide for the messages of more than chooseAbove
// bytes up to it (chooseAbove ≥ eagerMax: the limit alone decides). Like
// the limit itself, it must be set before the first long message, or
// between phases.
func (l *LMT) SetEagerRange(chooseAbove, eagerMax int) error {
	if chooseAbove < 0 || eagerMax < 0 {
		return fmt.Errorf("attach: eager range (%d, %d]: want sizes of 0 or more", chooseAbove, eagerMax)
	}
	l.chooseAbove, l.eagerMax = chooseAbove, eagerMax
	return l.ep.SetLMT(l, eagerMax)
}

// ChooseAbove implements nemesis.LMTChooser.
func (l *LMT) ChooseAbove() int { return l.chooseAbove }

// ViaLMT implements nemesis.LMTChooser.
func (l *LMT) ViaLMT(peer, n int) bool {
	if l.choosers == nil || l.choosers[peer] == nil {
		return false
	}
	return !l.choosers[peer].Eager(int64(n))
}

// EagerSent implements nemesis.LMTChooser.
func (l *LMT) EagerSent(peer, n int, d time.Duration) {
	if l.choosers != nil && l.choosers[peer] != nil {
		l.choosers[peer].ObserveEager(int64(n), d)
	}
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
	// The endpoint's wait watches the receivers: one that died ends it
	// through PeerFailed; a failing endpoint ends it too, nothing more
	// can arrive.
	_ = l.ep.WaitFor(func() bool { return l.eng.InChannel() == 0 })
	err := l.eng.Close()
	// A transfer that Close failed while its backend still works on its
	// buffers (a net-read receive with reads in flight) completes only
	// once the backend is quiet, at a Progress: the endpoint drives the
	// engine until then, which the backend's contract bounds (its reads
	// end, or are cancelled with a lost peer), before it lets go of it.
	_ = l.ep.WaitFor(func() bool { return l.eng.Pending() == 0 })
	l.ep.SetLMT(nil, 0)
	return err
}

// Isend is Endpoint.Isend with backend forced for this message (when it is
// long enough to go through the LMT at all). The backend travels on r to
// StartSend.
func (l *LMT) Isend(r *nemesis.Request, dst, tag int, buf []byte, backend string) error {
	return l.forced(r, backend, func() error { return l.ep.Isend(r, dst, tag, buf) })
}

// Isendv is Endpoint.Isendv with backend forced for this message (when it
// is long enough to go through the LMT at all).
func (l *LMT) Isendv(r *nemesis.Request, dst, tag int, iov [][]byte, backend string) error {
	return l.forced(r, backend, func() error { return l.ep.Isendv(r, dst, tag, iov) })
}

// forced runs isend with backend on r. StartSend takes it, at once or
// from a later Poll when the send waited for cells; a send that will not
// reach the LMT (eager, or failed) leaves nothing behind for r's next
// message.
func (l *LMT) forced(r *nemesis.Request, backend string, isend func() error) error {
	st := stateOf(r)
	st.backend = backend
	err := isend()
	if err != nil || r.Done() || r.Len() <= l.eagerMax {
		st.backend = ""
	}
	return err
}

// Stats returns the statistics of the transfer carrying r, if r went
// through the LMT and has not been reused.
func Stats(r *nemesis.Request) (lmt.Stats, bool) {
	if t := Transfer(r); t != nil && r.ViaLMT() {
		return t.Stats(), true
	}
	return lmt.Stats{}, false
}

// Transfer returns the engine's transfer of r's last large message, or
// nil: the one in flight while r is pending, or the completed one until r
// is reused.
func Transfer(r *nemesis.Request) *lmt.Transfer {
	if s, ok := r.LMTData.(*request); ok {
		return s.t
	}
	return nil
}

// StartSend implements nemesis.LMT.
func (l *LMT) StartSend(r *nemesis.Request, rts []byte) (int, error) {
	st := stateOf(r)
	backend := st.backend // forced by Isend, or ""
	st.backend = ""
	selected := false
	switch {
	case backend != "":
	case r.Type() == nil && l.ep.InArena(r.Iov()) && !l.ep.Remote(r.Peer()):
		// The receiver copies straight out of the arena, once: no
		// backend does better, and none needs learning. (A typed
		// request's Iov is nil, which InArena takes for a list all in
		// the arena: its base buffer is not in the list.)
		backend = lmt.Arena
	case l.selectors != nil && r.Type() == nil:
		// A typed message takes the engine's own order instead (a
		// CMA backend, in place, before a stream one: lmt.Datatyped),
		// not what the selector measured of contiguous ones.
		if s := l.selectors[r.Peer()]; s != nil {
			backend, selected = s.Backend(int64(r.Len())), true
		}
	}
	l.release(st)
	// The request's own list, Isendv's entries as the caller gave them:
	// the engine copies the list (not the bytes) and each backend moves
	// the entries with its native iovec handling, no packing. A typed
	// request's description goes as such, to a CMA backend.
	t, n, err := l.startSend(r, backend, rts)
	if err != nil && selected && unavailable(err) {
		// The selector's choice cannot take this message now (arena-copy
		// with every slot in flight): the preference list can.
		t, n, err = l.startSend(r, "", rts)
	}
	if err != nil {
		return 0, err
	}
	t.User, st.t = r, t
	return n, nil
}

// startSend starts r's transfer on backend: of its list, or of its
// description when it is typed (Endpoint.IsendType). A forced backend
// that takes no description gives way to the engine's choice.
func (l *LMT) startSend(r *nemesis.Request, backend string, rts []byte) (*lmt.Transfer, int, error) {
	typ := r.Type()
	if typ == nil {
		return l.eng.StartSend(r.Peer(), r.Iov(), backend, rts)
	}
	t, n, err := l.eng.StartSendType(r.Peer(), r.Buf(), typ, backend, rts)
	if err != nil && backend != "" {
		t, n, err = l.eng.StartSendType(r.Peer(), r.Buf(), typ, "", rts)
	}
	return t, n, err
}

// unavailable reports whether err is an *lmt.Unavailable: apart from
// StartSend, whose every message would otherwise allocate the target.
func unavailable(err error) bool {
	var u *lmt.Unavailable
	return errors.As(err, &u)
}

// release gives the engine back the transfer that carried the request's
// previous message: the request is being reused, so Stats no longer needs
// it, and the engine reuses it for this message instead of allocating.
func (l *LMT) release(st *request) {
	if old := st.t; old != nil && old.Done() {
		st.t = nil
		_ = l.eng.Release(old) // fails only for a transfer of another engine
	}
}

// StartRecv implements nemesis.LMT.
func (l *LMT) StartRecv(r *nemesis.Request, rts []byte) error {
	st := stateOf(r)
	l.release(st)
	var t *lmt.Transfer
	var err error
	if typ := r.Type(); typ != nil {
		t, err = l.eng.StartRecvType(r.Peer(), rts, r.Buf(), typ)
	} else {
		t, err = l.eng.StartRecv(r.Peer(), rts, r.Iov())
	}
	if err != nil {
		return err
	}
	t.User, st.t = r, t
	if !t.Done() {
		return nil
	}
	// Failed at once (dead peer, no usable backend): OnComplete ran
	// before User was set.
	l.ep.Complete(r, 0, t.Err())
	return nil
}

// ArenaViaLMT implements nemesis.LMTArena: a message from arena buffers
// comes here only when a backend was forced on it (Isend, Isendv) or the
// preference list names the arena backend; otherwise the endpoint's own
// single copy, which has no rendezvous to pay, carries it.
func (l *LMT) ArenaViaLMT(r *nemesis.Request) bool {
	if l.arenaLMT {
		return true
	}
	st, ok := r.LMTData.(*request)
	return ok && st.backend != ""
}

// Datatypes implements nemesis.LMTDatatypes: typed messages go to the
// engine's StartSendType and StartRecvType.
func (l *LMT) Datatypes() bool { return true }

// HandleControl implements nemesis.LMT.
func (l *LMT) HandleControl(src int, pkt []byte) error { return l.eng.HandleControl(src, pkt) }

// Progress implements nemesis.LMT.
func (l *LMT) Progress() error { return l.eng.Progress() }

// BytesMoved implements nemesis.LMTMeter, so that Endpoint.Wait sees the
// chunks go by.
func (l *LMT) BytesMoved() uint64 { return l.eng.BytesMoved() }

// Idle implements nemesis.LMTIdler: with no transfer in flight, a rank
// blocked in a receive may doze as long as one without an LMT.
func (l *LMT) Idle() bool { return l.eng.Pending() == 0 }

// PollFds implements nemesis.LMTPoller: Endpoint.Wait sleeps in poll(2)
// on the pipes transfers wait for.
func (l *LMT) PollFds(dst []unix.PollFd) []unix.PollFd { return l.eng.PollFds(dst) }

// PeerFailed implements nemesis.LMT.
func (l *LMT) PeerFailed(rank int, err error) { l.eng.PeerFailed(rank, err) }

func (l *LMT) complete(t *lmt.Transfer) {
	r, ok := t.User.(*nemesis.Request)
	if !ok {
		return
	}
	err, st := t.Err(), t.Stats()
	if err == nil && st.Moving > 0 {
		// A sender on a buffered channel completes before its Moving
		// is known; OnMeasured brings it.
		l.observe(t)
	}
	if errors.Is(err, lmt.ErrTruncated) {
		err = nil // the endpoint reports its own ErrTruncated
	}
	l.ep.Complete(r, int(st.Bytes), err)
}

// observe tells the peer's selector how long a sent message took to move.
func (l *LMT) observe(t *lmt.Transfer) {
	if t.Side() != lmt.Sender || l.selectors == nil || t.Backend() == lmt.Arena || t.Typed() {
		return // the arena is chosen by the buffer, a typed message's backend by its description: neither is learned
	}
	if s := l.selectors[t.Peer()]; s != nil {
		st := t.Stats()
		cost := st.Moving
		if t.MessageLen() <= int64(l.eagerMax) && st.Elapsed > cost {
			// Up to the eager limit the LMT competes with the eager
			// path, whose cost is a whole send: charge the rendezvous
			// too, or a message whose round trips outweigh its copy
			// looks cheaper than eager and takes the LMT.
			cost = st.Elapsed
		}
		s.Observe(st.Backend, t.MessageLen(), cost)
	}
}

type control struct{ ep *nemesis.Endpoint }

func (c control) Send(dst int, pkt []byte) (bool, error) { return c.ep.SendControl(dst, pkt) }

var (
	_ nemesis.LMT          = (*LMT)(nil)
	_ nemesis.LMTMeter     = (*LMT)(nil)
	_ nemesis.LMTPoller    = (*LMT)(nil)
	_ nemesis.LMTChooser   = (*LMT)(nil)
	_ nemesis.LMTDatatypes = (*LMT)(nil)
	_ nemesis.LMTArena     = (*LMT)(nil)
)
