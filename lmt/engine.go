package lmt

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/knemesis/knemesis/internal/fastclock"
	"github.com/knemesis/knemesis/nemesis/launch"
	"golang.org/x/sys/unix"
)

// Control carries the engine's rendezvous packets to another rank. In a job
// it is the Nemesis endpoint; Send must not block: ok == false means "no
// room now", and the Engine retries from Progress. Packets from one rank to
// another must arrive in the order they were sent, at the peer Engine's
// HandleControl.
type Control interface {
	Send(dst int, pkt []byte) (ok bool, err error)
}

// Config describes an Engine. Zero fields take the defaults below.
type Config struct {
	Rank, Size int
	Job        string  // names shared objects (rings, FIFOs); required
	Control    Control // required
	// PeerPID returns the process id of a rank, 0 when unknown. With it
	// the Engine notices a dead peer instead of waiting for it forever.
	PeerPID func(rank int) int
	// Prefer lists backend names in order of preference; the first one
	// available with a peer carries the message. Default: shm, vmsplice,
	// cma, pipe, cma-write (those registered).
	Prefer []string
	// Chunk bounds the bytes one Progress call moves per transfer
	// (default 64 KiB), so that small messages keep flowing.
	Chunk int
	// CMAChunk replaces Chunk for the CMA backends (default 4 MiB): each
	// process_vm_readv or process_vm_writev costs some 3 µs beyond its
	// copy (a system call, the peer's pages pinned and released), as
	// much as copying 64 KiB, and 4 MiB still moves in 0.2-0.5 ms.
	CMAChunk int
	// Dir is a private directory for the job's FIFOs (default
	// launch.JobDir(Job), $TMPDIR/knemesis-<job>, created 0700, which
	// the launcher removes when the job ends). Ranks remove the FIFOs
	// they made and the last one the directory; only the launcher's
	// removal covers a rank killed between making a FIFO and its peer
	// opening it, so a Dir of the caller's own needs the same care.
	Dir string
	// ShmSlots and ShmSlotSize shape the shm ring (default 16 × 32 KiB:
	// 512 KiB per ordered pair of ranks that use it, mapped on first use).
	ShmSlots, ShmSlotSize int
	// NoEarly keeps senders from filling a channel before the CTS (see
	// [Early]); for measuring what early filling saves.
	NoEarly bool
	// NoBuffered makes senders on [Buffered] backends wait for the
	// receiver's DONE like the others; for measuring what it saves.
	NoBuffered bool
	// NoGrantAhead makes receivers on [Ordered] backends grant their
	// channel to one message at a time; for measuring what granting
	// ahead saves.
	NoGrantAhead bool
	// PipeSize is the pipe capacity the pipe and vmsplice backends ask for
	// with F_SETPIPE_SZ (default 1 MiB); MinPipeSize is the smallest
	// they accept before refusing (default 64 KiB, the kernel default).
	PipeSize, MinPipeSize int
	// PipeChunk bounds what a pipe backend moves per Step (default: the
	// pipe's capacity, the paper's chunk of one pipe-full). Every chunk
	// costs the reader a wake-up, which a busy machine makes expensive.
	PipeChunk int
	// PipeMaxSizePath is where the pipe size cap is read (default
	// /proc/sys/fs/pipe-max-size; tests point it at a fake).
	PipeMaxSizePath string
	// MaxSegments bounds the address list a CMA handle carries (default
	// 64); a message with more non-empty segments goes another way.
	MaxSegments int
	// OnComplete, when set, is called when a transfer completes on this
	// side, from within StartRecv, HandleControl, Progress or PeerFailed.
	// A sender on a [Buffered] backend completes once its bytes are in
	// the channel, before the receiver's DONE says how long they took.
	OnComplete func(t *Transfer)
	// OnMeasured, when set, is called for such a sender when the DONE
	// arrives, with Stats.Moving filled in (a selector learning from
	// measurements wants the receiver's time, not the sender's copy into
	// the channel). It is not called if the receiver failed or died.
	OnMeasured func(t *Transfer)
}

// Defaults.
const (
	DefaultChunk       = 64 << 10
	DefaultCMAChunk    = 4 << 20
	DefaultShmSlots    = 16 // see shm.go for why not MPICH's 8
	DefaultShmSlotSize = 32 << 10
	DefaultPipeSize    = 1 << 20
	DefaultMinPipeSize = 64 << 10
	DefaultMaxSegments = 64
	PipeMaxSizeFile    = "/proc/sys/fs/pipe-max-size"
)

var defaultPrefer = []string{"shm", "vmsplice", "cma", "pipe", "cma-write"}

func (c *Config) setDefaults() {
	if c.Chunk <= 0 {
		c.Chunk = DefaultChunk
	}
	if c.CMAChunk <= 0 {
		c.CMAChunk = DefaultCMAChunk
	}
	if c.ShmSlots <= 0 {
		c.ShmSlots = DefaultShmSlots
	}
	if c.ShmSlotSize <= 0 {
		c.ShmSlotSize = DefaultShmSlotSize
	}
	if c.PipeSize <= 0 {
		c.PipeSize = DefaultPipeSize
	}
	if c.MinPipeSize <= 0 {
		c.MinPipeSize = DefaultMinPipeSize
	}
	if c.PipeMaxSizePath == "" {
		c.PipeMaxSizePath = PipeMaxSizeFile
	}
	if c.MaxSegments <= 0 {
		c.MaxSegments = DefaultMaxSegments
	}
	if len(c.Prefer) == 0 {
		c.Prefer = defaultPrefer
	}
	if c.Dir == "" && c.Job != "" {
		c.Dir = launch.JobDir(c.Job)
	}
}

// Errors a transfer may complete with; test them with errors.Is.
var (
	ErrTruncated = errors.New("lmt: message truncated")
	ErrPeerGone  = errors.New("lmt: peer process is gone")
	ErrClosed    = errors.New("lmt: engine closed")
)

// TruncationError completes a receive whose buffers were shorter than the
// message: the first Cap bytes were delivered, nothing past them written.
type TruncationError struct{ Len, Cap int64 }

func (e *TruncationError) Error() string {
	return fmt.Sprintf("lmt: message of %d bytes truncated to the %d-byte receive buffer", e.Len, e.Cap)
}
func (e *TruncationError) Is(target error) bool { return target == ErrTruncated }

// PeerError completes a transfer whose peer process died.
type PeerError struct {
	Rank, PID int
	Err       error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("lmt: peer rank %d (pid %d) is gone: %v", e.Rank, e.PID, e.Err)
}
func (e *PeerError) Is(target error) bool { return target == ErrPeerGone }
func (e *PeerError) Unwrap() error        { return e.Err }

// RemoteError completes a transfer that the peer's Engine failed.
type RemoteError struct {
	Rank int
	Msg  string
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("lmt: rank %d failed the transfer: %s", e.Rank, e.Msg)
}

// Stats describe one transfer, on one side.
type Stats struct {
	Backend  string
	Bytes    int64 // payload bytes this side moved or saw moved
	Chunks   int   // Steps that moved data
	Syscalls int   // system calls made for the payload
	// Early is how many bytes the sender put into the channel before
	// the CTS (see [Early]) and the receiver kept.
	Early int64
	// Elapsed runs from StartSend or StartRecv to completion on this
	// side.
	Elapsed time.Duration
	// Moving is how long the payload took to move, without the time the
	// message waited for its receive to be posted: for the receiver, and
	// for a sender whose receiver did the moving (its DONE carries it),
	// from the match to completion; for a pushing sender, from the CTS;
	// for the sender of a Split transfer, the receiver's time from the
	// match to its own half in (the two halves move at once, and the
	// sender reads no clock on its way to its copy).
	// A selector learning from measurements weighs this.
	Moving time.Duration
}

// monotonic is the engines' clock, read some five times per message:
// fastclock's, which on this kind of machine costs a third of time.Now.
func monotonic() time.Duration { return time.Duration(fastclock.Nanotime()) }

type tstate uint8

const (
	stWaitCTS tstate = iota + 1
	stQueued         // a Stream side waiting for its channel (a sender: its turn, see passTurn)
	stActive
	stWaitDone
	stDone
)

// backendSlot is one backend of an Engine with its per-peer bookkeeping.
type backendSlot struct {
	id   uint8
	name string
	flow Flow
	b    Backend
	// blocker is b as a Blocker, or nil: asserted once here, not on
	// every idle poll of a waiter.
	blocker Blocker
	check   []error // per rank, after checked[rank]
	known   []bool
	// Receiver side of a Stream: the transfer holding the channel from
	// each rank and those waiting for it, in the order they matched.
	busy  []*Transfer
	queue [][]*Transfer
	// Sender side: the one transfer per rank that may fill the channel
	// before its CTS (see countSender: the receiver must find the
	// channel's pieces in the order it reads them).
	early   Early
	pushing []int // senders per rank past their CTS with bytes not yet in the channel
	// uncommitted counts senders per rank with early pieces in the
	// channel and no CTS yet. The ring says which one the receiver
	// skipped in a single word, so only one may have pieces at a time.
	uncommitted []int
	earlyFor    []*Transfer
	// buffered: a sender completes once its bytes are in the channel
	// (see [Buffered]).
	buffered bool
	// ordered: the channel is a plain FIFO (see [Ordered]): a receiver
	// sends the CTS of the messages queued for it at once, and senders
	// push in the order their CTSs came, pushQueue[rank] holding those
	// of rank past their CTS with bytes still to push, oldest first.
	ordered   bool
	pushQueue [][]*Transfer
	// chunk bounds what one Step moves: Config.Chunk, or what b asks
	// for as a [Chunker].
	chunk int
}

type peerState struct {
	pidfd int // -1 until opened
	pid   int
	gone  error
	// exited is the peer's death as an idle transfer found it, before
	// its transfers fail: graceLeft more Progress calls first.
	exited    error
	graceLeft int
}

// Engine runs the large-message transfers of one process. It is driven by
// one goroutine: none of its methods may be called concurrently.
type Engine struct {
	cfg    Config
	env    Env
	slots  [256]*backendSlot // by backend id, as RTS packets name them
	named  []*backendSlot    // the registered ones, for lookups by name
	prefer []*backendSlot
	peers  []peerState

	table []*Transfer // by id index; nil when free
	gens  []uint32
	free  []uint32

	live    []*Transfer
	exiting int // peers whose exited is set and not yet failed
	outbox  []*Transfer
	pool    []*Transfer // released transfers, their buffers kept
	bytes   uint64      // moved by this side, all transfers
	pass    uint64      // Progress calls so far
	pfd     [1]unix.PollFd
	closed  bool
}

// New creates an Engine with every registered backend.
func New(cfg Config) (*Engine, error) {
	cfg.setDefaults()
	if cfg.Size < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("lmt: rank %d of job size %d is out of range", cfg.Rank, cfg.Size)
	}
	if cfg.Job == "" || cfg.Control == nil {
		return nil, errors.New("lmt: Config needs a Job name and a Control channel")
	}
	e := &Engine{cfg: cfg}
	_ = monotonic() // calibrates the clock (2 ms, once a process) now, not on the first message
	e.env = Env{Rank: cfg.Rank, Size: cfg.Size, Job: cfg.Job, Dir: cfg.Dir, Config: &e.cfg, PeerPID: e.peerPID}
	e.peers = make([]peerState, cfg.Size)
	for i := range e.peers {
		e.peers[i].pidfd = -1
	}
	for _, r := range registry {
		b, err := r.factory(&e.env)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("lmt: creating backend %s: %w", r.name, err)
		}
		blocker, _ := b.(Blocker)
		early, _ := b.(Early)
		if r.flow != Stream || cfg.NoEarly {
			early = nil
		}
		buf, _ := b.(Buffered)
		buffered := r.flow == Stream && buf != nil && buf.Buffered() && !cfg.NoBuffered
		ord, _ := b.(Ordered)
		ordered := r.flow == Stream && early == nil && ord != nil && ord.Ordered() && !cfg.NoGrantAhead
		chunk := cfg.Chunk
		if c, ok := b.(Chunker); ok {
			chunk = c.Chunk()
		}
		e.slots[r.id] = &backendSlot{
			id: r.id, name: r.name, flow: r.flow, b: b, blocker: blocker,
			check: make([]error, cfg.Size), known: make([]bool, cfg.Size),
			busy: make([]*Transfer, cfg.Size), queue: make([][]*Transfer, cfg.Size),
			early: early, pushing: make([]int, cfg.Size), earlyFor: make([]*Transfer, cfg.Size),
			uncommitted: make([]int, cfg.Size),
			buffered:    buffered,
			ordered:     ordered, pushQueue: make([][]*Transfer, cfg.Size),
			chunk: chunk,
		}
		e.named = append(e.named, e.slots[r.id])
	}
	for rank := range e.peers {
		if rank != cfg.Rank {
			e.openPidfd(rank) // now, while every peer is known alive
		}
	}
	for _, name := range cfg.Prefer {
		if s := e.slot(name); s != nil {
			e.prefer = append(e.prefer, s)
		}
	}
	if len(e.prefer) == 0 {
		e.Close()
		return nil, fmt.Errorf("lmt: none of the preferred backends %v is registered (have %v)", cfg.Prefer, Backends())
	}
	return e, nil
}

// slot finds a backend by name. Every message with a forced or selected
// backend passes here: it walks the handful registered, not the 256 ids
// (ranging over that array by value also copied its 2 KiB each time).
func (e *Engine) slot(name string) *backendSlot {
	for _, s := range e.named {
		if s.name == name {
			return s
		}
	}
	return nil
}

// Rank returns the rank the Engine was created for.
func (e *Engine) Rank() int { return e.cfg.Rank }

// Check reports whether backend name can be used with rank (cached after
// the first call). Nil, or an *Unavailable.
func (e *Engine) Check(name string, rank int) error {
	s := e.slot(name)
	if s == nil {
		return fmt.Errorf("lmt: no backend %q in this engine (have %v)", name, Backends())
	}
	if rank < 0 || rank >= e.cfg.Size {
		return fmt.Errorf("lmt: rank %d out of range 0..%d", rank, e.cfg.Size-1)
	}
	return e.check(s, rank)
}

func (e *Engine) check(s *backendSlot, rank int) error {
	if !s.known[rank] {
		s.check[rank] = s.b.Check(Peer{Rank: rank, PID: e.peerPID(rank)})
		s.known[rank] = true
	}
	return s.check[rank]
}

func (e *Engine) peerPID(rank int) int {
	if e.cfg.PeerPID == nil || rank < 0 || rank >= e.cfg.Size {
		return 0
	}
	return e.cfg.PeerPID(rank)
}

// StartSend starts sending the message held in iov (zero-length entries are
// fine) to rank dst and writes the RTS into rts, returning its length. The
// RTS must reach dst's StartRecv with the message's match information. The
// buffers belong to the Engine until the transfer completes. backend forces
// a backend ("" chooses the first available of Config.Prefer).
func (e *Engine) StartSend(dst int, iov [][]byte, backend string, rts []byte) (*Transfer, int, error) {
	if e.closed {
		return nil, 0, ErrClosed
	}
	if dst < 0 || dst >= e.cfg.Size || dst == e.cfg.Rank {
		return nil, 0, fmt.Errorf("lmt: destination rank %d is not a peer (job of %d, self %d)", dst, e.cfg.Size, e.cfg.Rank)
	}
	if err := e.peers[dst].gone; err != nil {
		return nil, 0, err
	}
	if len(rts) < hdrLen {
		return nil, 0, fmt.Errorf("lmt: RTS buffer of %d bytes, need at least %d", len(rts), hdrLen)
	}
	t := e.newTransfer(dst, Sender, iov)
	t.started = monotonic()
	t.moveStart = t.started
	t.msgLen = iovLen(iov)
	t.length = t.msgLen
	s, err := e.chooseSend(t, backend, len(rts)-hdrLen)
	if err != nil {
		e.drop(t)
		return nil, 0, err
	}
	t.setSlot(s)
	n := 0
	if s.flow.handleInRTS() {
		if n, err = s.b.Handle(t, rts[hdrLen:]); err != nil {
			e.drop(t)
			return nil, 0, err
		}
	}
	if s.flow == Pull {
		t.state = stWaitDone
	} else {
		t.state = stWaitCTS
	}
	e.register(t)
	e.countSender(t, s)
	putHeader(rts, pktRTS, s.id, 0, n, t.id, 0, t.msgLen)
	e.goLive(t)
	return t, hdrLen + n, nil
}

// countSender puts sender t on slot s. One transfer to rank t.peer at a
// time may fill the channel before its CTS: the oldest still waiting for
// its CTS with nothing in the channel yet. t takes it when nobody holds it;
// otherwise the holder's CTS passes it on (passEarly), so that a sender
// running ahead of its receiver keeps the channel full. It fills only while
// every other sender to that rank on the slot that has had its CTS has
// pushed all its bytes, and no other one's early pieces await their CTS:
// the receiver is then committed to those, and finds t's early pieces after
// theirs. If the receiver matches a later message first, that message's
// CTS ends t's filling for good before the later message pushes a byte
// (HandleControl): all of t's pieces lie ahead of the later one's, the
// receiver skips them, and t starts over at its own CTS.
func (e *Engine) countSender(t *Transfer, s *backendSlot) {
	t.setSlot(s)
	if s.early == nil || t.length == 0 || s.earlyFor[t.peer] != nil {
		return // the holder's CTS passes the right on
	}
	t.early = true
	s.earlyFor[t.peer] = t
}

// passEarly gives the right to fill before the CTS, when nobody holds it,
// to the oldest sender to peer on s still waiting for its CTS that has
// nothing in the channel yet: one that lost the right after filling must
// not add pieces behind a later message's. e.live is in start order.
func (e *Engine) passEarly(s *backendSlot, peer int) {
	if s.early == nil || s.earlyFor[peer] != nil {
		return
	}
	for _, t := range e.live {
		if t.side == Sender && t.peer == peer && t.s == s && t.state == stWaitCTS && t.moved == 0 && t.length > 0 {
			t.early = true
			s.earlyFor[peer] = t
			return
		}
	}
}

// pushed is called when sender t has put its last byte in the channel, or
// failed.
func (e *Engine) pushed(t *Transfer) {
	if t.pushing {
		t.pushing = false
		t.s.pushing[t.peer]--
		if t.s.ordered {
			e.passTurn(t)
		}
	}
}

// passTurn takes t off its pushQueue and, if it was pushing, lets the next
// sender push: the receiver reads their bytes in the order it sent the
// CTSs, and the control channel keeps that order.
func (e *Engine) passTurn(t *Transfer) {
	q := t.s.pushQueue[t.peer]
	i := 0
	for i < len(q) && q[i] != t {
		i++
	}
	if i == len(q) {
		return
	}
	copy(q[i:], q[i+1:])
	q[len(q)-1] = nil
	q = q[:len(q)-1]
	t.s.pushQueue[t.peer] = q
	if i == 0 && len(q) > 0 && q[0].state == stQueued {
		q[0].state = stActive
		e.finishIfEmpty(q[0])
	}
}

// uncountSender takes sender t off its slot.
func (e *Engine) uncountSender(t *Transfer) {
	e.pushed(t)
	e.committed(t)
	t.early = false
	if t.s.earlyFor[t.peer] == t {
		t.s.earlyFor[t.peer] = nil
		e.passEarly(t.s, t.peer)
	}
}

func (e *Engine) chooseSend(t *Transfer, backend string, room int) (*backendSlot, error) {
	if backend != "" {
		s := e.slot(backend)
		if s == nil {
			return nil, fmt.Errorf("lmt: no backend %q (have %v)", backend, Backends())
		}
		if err := e.check(s, t.peer); err != nil {
			return nil, err
		}
		if s.flow.handleInRTS() && !fitsHandle(t, room, e.cfg.MaxSegments) {
			return nil, fmt.Errorf("lmt: backend %s: %d segments do not fit its handle (max %d, %d RTS bytes)", backend, nonEmpty(t.iov), e.cfg.MaxSegments, room)
		}
		return s, nil
	}
	var first error
	for _, s := range e.prefer {
		err := e.check(s, t.peer)
		if err == nil && s.flow.handleInRTS() && !fitsHandle(t, room, e.cfg.MaxSegments) {
			continue
		}
		if err == nil {
			return s, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, fmt.Errorf("lmt: no backend available for rank %d: %w", t.peer, first)
}

func fitsHandle(t *Transfer, room, maxSegs int) bool {
	n := nonEmpty(t.iov)
	return n <= maxSegs && segHandleLen(n) <= room
}

// StartRecv starts receiving, into iov, the message whose RTS (from rank src)
// matched. rts is only read during the call.
func (e *Engine) StartRecv(src int, rts []byte, iov [][]byte) (*Transfer, error) {
	if e.closed {
		return nil, ErrClosed
	}
	if src < 0 || src >= e.cfg.Size || src == e.cfg.Rank {
		return nil, fmt.Errorf("lmt: source rank %d is not a peer", src)
	}
	var h header
	payload, err := parseHeader(rts, &h)
	if err != nil {
		return nil, err
	}
	if h.typ != pktRTS {
		return nil, fmt.Errorf("lmt: StartRecv given a %s packet, not an RTS", h.typ)
	}
	t := e.newTransfer(src, Receiver, iov)
	t.started = monotonic()
	t.moveStart = t.started
	t.peerID = h.src
	t.msgLen = h.length
	t.length = min(h.length, iovLen(iov))
	e.register(t)
	e.goLive(t)
	if err := e.peers[src].gone; err != nil {
		t.setSlot(e.slots[h.kind])
		e.complete(t, err)
		return t, nil
	}
	s := e.slots[h.kind]
	var refused error
	if s == nil {
		refused = fmt.Errorf("lmt: rank %d chose backend id %d, not registered here", src, h.kind)
	} else {
		refused = e.check(s, src)
	}
	if refused == nil && s.flow.handleInCTS() && !fitsHandle(t, hdrLen+segHandleLen(e.cfg.MaxSegments), e.cfg.MaxSegments) {
		refused = fmt.Errorf("lmt: %d receive segments do not fit a %s handle (max %d)", nonEmpty(iov), s.name, e.cfg.MaxSegments)
	}
	if refused != nil {
		if err := e.peerAlive(src); err != nil {
			e.PeerFailed(src, err)
			return t, nil
		}
		// The receiver has the last word: pick a backend that needs no
		// handle from the sender and say so in the CTS.
		s = e.fallback(t)
		if s == nil {
			t.setSlot(e.slots[h.kind])
			e.fail(t, fmt.Errorf("lmt: no fallback among %v: %w", e.cfg.Prefer, refused))
			return t, nil
		}
	} else if s.flow.handleInRTS() {
		if err := s.b.SetPeerHandle(t, payload); err != nil {
			var u *Unavailable
			if !errors.As(err, &u) {
				t.setSlot(s)
				e.fail(t, err)
				return t, nil
			}
			// Usable in general, not with this handle: fall back.
			if s = e.fallback(t); s == nil {
				t.setSlot(e.slots[h.kind])
				e.fail(t, fmt.Errorf("lmt: no fallback among %v: %w", e.cfg.Prefer, err))
				return t, nil
			}
		}
	}
	t.setSlot(s)
	switch s.flow {
	case Pull:
		e.activate(t)
	case Stream:
		if s.busy[src] != nil {
			t.state = stQueued
			s.queue[src] = append(s.queue[src], t)
			if s.ordered {
				e.grantAhead(t)
			}
		} else {
			e.grant(t)
		}
	case Push, Split:
		if err := s.b.Start(t); err != nil {
			e.fail(t, err)
			break
		}
		n, err := s.b.Handle(t, t.packet()[hdrLen:])
		if err != nil {
			e.fail(t, err)
			break
		}
		e.send(t, pktCTS, 0, n, t.length)
		if s.flow == Push {
			t.state = stWaitDone
			break
		}
		t.state = stActive // copy the first half while the sender copies the second
		e.finishIfEmpty(t)
	}
	return t, nil
}

func (e *Engine) fallback(t *Transfer) *backendSlot {
	for _, s := range e.prefer {
		if s.flow.handleInRTS() || s.flow == Push && !fitsHandle(t, segHandleLen(e.cfg.MaxSegments), e.cfg.MaxSegments) {
			continue
		}
		if e.check(s, t.peer) == nil {
			return s
		}
	}
	return nil
}

// grant gives a Stream receiver its channel and tells the sender to go,
// unless grantAhead already did.
func (e *Engine) grant(t *Transfer) {
	t.s.busy[t.peer] = t
	if !t.ctsSent {
		if err := t.s.b.Start(t); err != nil {
			e.fail(t, err)
			return
		}
		e.send(t, pktCTS, 0, 0, t.length)
	}
	t.state = stActive
	e.finishIfEmpty(t)
}

// grantAhead sends the CTS of a receiver queued behind another on an
// [Ordered] channel. Its sender pushes once the bytes of every earlier CTS
// are in, so they follow those the receiver reads first: the channel never
// runs dry between two messages while a CTS crosses, as it would if the
// CTS left only when the message ahead was read.
func (e *Engine) grantAhead(t *Transfer) {
	if err := t.s.b.Start(t); err != nil {
		e.fail(t, err)
		return
	}
	t.ctsSent = true
	e.send(t, pktCTS, 0, 0, t.length)
}

func (e *Engine) activate(t *Transfer) {
	if err := t.s.b.Start(t); err != nil {
		e.fail(t, err)
		return
	}
	if t.side == Sender && t.s.ordered && t.s.pushQueue[t.peer][0] != t {
		t.state = stQueued // pushes when the senders whose CTS came first have
		return
	}
	t.state = stActive
	e.finishIfEmpty(t)
}

func (e *Engine) finishIfEmpty(t *Transfer) {
	// moved passes length when the sender filled the channel early with
	// more than a truncating receiver takes.
	if t.state == stActive && t.moved >= t.end() {
		e.sideDone(t)
	}
}

// HandleControl takes a packet the Engine of rank src sent through Control.
func (e *Engine) HandleControl(src int, pkt []byte) error {
	var h header
	payload, err := parseHeader(pkt, &h)
	if err != nil {
		return err
	}
	t := e.lookup(h.dst)
	if t == nil || t.peer != src {
		return nil // late packet for a transfer that already failed
	}
	switch h.typ {
	case pktCTS:
		// A pull sender waits for DONE, unless the receiver could not
		// pull and names another backend in a CTS.
		if t.side != Sender || !(t.state == stWaitCTS || t.state == stWaitDone && t.s.flow == Pull) {
			return fmt.Errorf("lmt: unexpected CTS from rank %d for transfer in state %d", src, t.state)
		}
		t.peerID = h.src
		t.length = min(t.length, h.length)
		prev := t.s
		if h.kind != t.s.id {
			s := e.slots[h.kind]
			if s == nil || s.flow.handleInRTS() || e.check(s, src) != nil {
				e.fail(t, fmt.Errorf("lmt: rank %d asked for backend id %d, unusable here", src, h.kind))
				return nil
			}
			e.uncountSender(t)
			e.countSender(t, s)
		}
		t.early = false
		if prev.earlyFor[src] == t {
			prev.earlyFor[src] = nil
		}
		if h := t.s.earlyFor[src]; h != nil && h != t {
			// The receiver matched t before the holder, whose pieces
			// must all lie ahead of t's: it stops filling, and
			// passEarly never gives the right back to a sender
			// with pieces in the channel.
			h.early = false
		}
		t.s.earlyFor[src] = nil
		e.committed(t)
		t.pushing = true // later early fillers wait for its bytes
		t.s.pushing[src]++
		if t.s.ordered {
			t.s.pushQueue[src] = append(t.s.pushQueue[src], t)
		}
		if t.moved > 0 {
			if t.s == prev && prev.early.Kept(t) {
				t.stats.Early = t.moved
			} else {
				t.rewind()
			}
		}
		if t.s.flow.handleInCTS() {
			if t.s.flow == Push {
				t.moveStart = monotonic() // see Stats.Moving
			}
			if err := t.s.b.SetPeerHandle(t, payload); err != nil {
				e.fail(t, err)
				return nil
			}
		}
		if t.s.flow == Split {
			t.skip(SplitPoint(t.length)) // the receiver copies the first half
		}
		e.activate(t)
		e.passEarly(t.s, src)
	case pktDone:
		if h.status != statusOK {
			e.complete(t, &RemoteError{Rank: src, Msg: string(payload)})
			return nil
		}
		if t.side == Sender && h.src != 0 {
			t.stats.Moving = time.Duration(h.src) // see sendDone
		}
		if t.s.flow == Split {
			// The peer's half is in; the transfer is done when ours is.
			t.peerDone = true
			if t.state == stWaitDone {
				e.finishSplit(t, monotonic())
			}
			return nil
		}
		if t.side == Receiver || t.state == stWaitDone {
			t.stats.Bytes = h.length
			e.complete(t, e.truncation(t))
		} else {
			// A Stream sender normally has pushed everything by now; a
			// DONE before that means the receiver took less (it may
			// stop early only with an error, handled above).
			e.complete(t, nil)
		}
	default:
		return fmt.Errorf("lmt: unexpected %s packet from rank %d", h.typ, src)
	}
	return nil
}

func (e *Engine) truncation(t *Transfer) error {
	if t.side == Receiver && t.msgLen > t.length {
		return &TruncationError{Len: t.msgLen, Cap: t.length}
	}
	return nil
}

// idleCheckEvery is how many idle visits a transfer gets between two checks
// that its peer is alive: a poll(2) on a pidfd costs about as much as
// copying a few KiB, so it runs every few hundred microseconds of waiting.
const idleCheckEvery = 4096

// Progress advances every transfer by at most one chunk and retries
// control packets that found no room. It never blocks.
func (e *Engine) Progress() error {
	if len(e.outbox) > 0 {
		e.flush()
	}
	if e.exiting > 0 {
		e.failExited()
	}
	e.pass++
	for _, t := range e.live {
		if t.grantedIn == e.pass {
			// The receive behind one this pass completed: its
			// user may post the next receive first, whose CTS
			// lets the sender write while this side reads (see
			// grantNext).
			continue
		}
		if t.state != stActive {
			if t.early {
				e.fill(t)
				continue
			}
			e.idle(t)
			continue
		}
		max := int(min(int64(t.s.chunk), t.end()-t.moved))
		n, err := t.s.b.Step(t, max)
		if err != nil {
			e.fail(t, err)
			continue
		}
		if n == 0 {
			e.idle(t)
			continue
		}
		t.idleVisits = 0
		e.bytes += uint64(n)
		t.advance(n)
		if t.moved == t.end() {
			e.sideDone(t)
		}
	}
	e.sweep()
	return nil
}

// fill moves the next chunk of a sender waiting for its CTS into the
// channel, while there is room.
func (e *Engine) fill(t *Transfer) {
	if t.s.pushing[t.peer] != 0 || t.s.uncommitted[t.peer] != 0 && !t.inRing {
		// A committed transfer is still pushing, or another one's
		// early pieces await their CTS.
		e.idle(t)
		return
	}
	max := int(min(int64(e.cfg.Chunk), t.length-t.moved))
	n := t.s.early.Prefill(t, max)
	if n == 0 {
		if t.moved == t.length {
			t.early = false
		}
		e.idle(t)
		return
	}
	if !t.inRing {
		t.inRing = true
		t.s.uncommitted[t.peer]++
	}
	t.idleVisits = 0
	e.bytes += uint64(n)
	t.advance(n)
}

// committed is called when t's early pieces, if any, no longer await a CTS.
func (e *Engine) committed(t *Transfer) {
	if t.inRing {
		t.inRing = false
		t.s.uncommitted[t.peer]--
	}
}

func (e *Engine) idle(t *Transfer) {
	if t.state == stDone {
		return
	}
	t.idleVisits++
	if t.idleVisits%idleCheckEvery != 0 {
		return
	}
	if err := e.peerAlive(t.peer); err != nil {
		e.peerExited(t.peer, err)
	}
}

// ExitGrace is how many Progress calls pass between the sight of a peer's
// exit and the failure of its transfers. A peer may send its DONE and
// exit at once: the packet then sits in the control channel while the
// pidfd already says exited, and the poll that precedes each Progress
// (the endpoint's, which the engine does not see) must hand it over
// before a completed transfer is failed. A nemesis endpoint takes, a poll,
// what its fastboxes from a peer hold next and up to 64 cells from its
// queue: with its default 64 cells per rank, two polls hand over all a
// dead peer left; 4 leave room for more. A waiter that sees the exit
// itself (lmt/attach) polls as many times before it calls PeerFailed.
const ExitGrace = 4

// peerExited starts rank's grace, once.
func (e *Engine) peerExited(rank int, err error) {
	p := &e.peers[rank]
	if p.exited != nil || p.gone != nil {
		return
	}
	p.exited, p.graceLeft = err, ExitGrace
	e.exiting++
}

// failExited fails the transfers of the peers whose grace ran out.
func (e *Engine) failExited() {
	for rank := range e.peers {
		p := &e.peers[rank]
		if p.exited == nil {
			continue
		}
		if p.graceLeft--; p.graceLeft > 0 {
			continue
		}
		err := p.exited
		p.exited = nil
		e.exiting--
		e.PeerFailed(rank, err)
	}
}

// sweep drops completed transfers from the live list, keeping order.
func (e *Engine) sweep() {
	j := 0
	for _, t := range e.live {
		if t.state != stDone {
			e.live[j] = t
			j++
			continue
		}
		t.inLive = false
		e.recycle(t)
	}
	clear(e.live[j:])
	e.live = e.live[:j]
}

// sideDone is called when this side has moved all it had to move.
func (e *Engine) sideDone(t *Transfer) {
	if t.side == Sender && t.s.flow == Stream {
		t.state = stWaitDone // the data may still sit in the channel
		e.pushed(t)
		if t.s.buffered {
			e.handBack(t)
		}
		return
	}
	if t.s.flow == Split {
		e.halfDone(t)
		return
	}
	// The DONE tells the sender how long the move took here.
	now := monotonic()
	e.sendDone(t, t.moved, now-t.moveStart)
	e.completeAt(t, e.truncation(t), now)
}

// handBack completes a sender on a Buffered backend for its user: every
// byte is in the channel, which holds a copy, and the receiver committed to
// them with its CTS (a sender is active only after it). The transfer stays
// live until the receiver's DONE, which completeAt then takes quietly.
func (e *Engine) handBack(t *Transfer) {
	t.handedBack = true
	t.stats.Elapsed = monotonic() - t.started
	t.stats.Bytes = t.length
	e.uncountSender(t)
	if e.cfg.OnComplete != nil {
		e.cfg.OnComplete(t)
	}
}

// halfDone is called when this side of a Split transfer has copied its
// half. Each side says so with a DONE at once and completes when it also
// has the other's: the receiver's reaches the sender while the sender is
// still copying, so that neither waits a crossing for the other's
// completion. The receiver's DONE carries its time from the match, which
// stands for the sender's Stats.Moving (both halves move at once); the
// sender's is not timed (see sendDone).
//
// A receiver whose CTS still waits in the outbox keeps its DONE until it
// completes: a transfer has one packet buffer, and the DONE must not
// replace the CTS the sender needs to start.
func (e *Engine) halfDone(t *Transfer) {
	t.state = stWaitDone
	now := time.Duration(0)
	switch {
	case t.side == Sender:
		e.sendWithSource(t, pktDone, statusOK, 0, t.moved, 0)
	case t.pktPending:
		t.doneOwed = true
	default:
		now = monotonic()
		e.sendDone(t, t.moved, now-t.moveStart)
	}
	if !t.peerDone {
		return
	}
	if now == 0 {
		now = monotonic()
	}
	e.finishSplit(t, now)
}

// finishSplit completes either side of a Split transfer once both halves
// are in.
func (e *Engine) finishSplit(t *Transfer, now time.Duration) {
	t.moved = t.length
	t.stats.Bytes = t.length
	if t.doneOwed {
		t.doneOwed = false
		e.sendDone(t, t.length, now-t.moveStart)
	}
	e.completeAt(t, e.truncation(t), now)
}

// fail completes t with err and tells the peer, unless the peer is gone.
func (e *Engine) fail(t *Transfer, err error) {
	if t.state == stDone {
		return
	}
	var pe *PeerError
	if !errors.As(err, &pe) {
		msg := err.Error()
		p := t.packet()[hdrLen:]
		n := copy(p, msg)
		e.send(t, pktDone, statusFailed, n, t.moved)
	}
	if t.s != nil {
		t.s.b.Abort(t)
	}
	e.complete(t, err)
}

func (e *Engine) complete(t *Transfer, err error) { e.completeAt(t, err, monotonic()) }

// completeAt is complete with the time already read: a clock read costs
// 30 ns on this kind of VM, and the receiver's DONE path needs it anyway.
func (e *Engine) completeAt(t *Transfer, err error, now time.Duration) {
	if t.state == stDone {
		return
	}
	if t.handedBack {
		// Its user saw it succeed: the bytes were in the channel. A
		// receiver failing now reports that on its own side.
		t.state = stDone
		e.unregister(t)
		if err == nil && e.cfg.OnMeasured != nil {
			e.cfg.OnMeasured(t)
		}
		return
	}
	prev := t.state
	t.state, t.err = stDone, err
	t.stats.Elapsed = now - t.started
	if t.stats.Moving == 0 {
		t.stats.Moving = now - t.moveStart
	}
	if t.stats.Bytes < t.moved {
		t.stats.Bytes = t.moved
	}
	e.unregister(t)
	if t.side == Sender && t.s != nil {
		e.uncountSender(t)
	}
	if s := t.s; s != nil && t.side == Receiver && s.flow == Stream {
		if prev == stQueued {
			q := s.queue[t.peer]
			for i, x := range q {
				if x == t {
					s.queue[t.peer] = append(q[:i], q[i+1:]...)
					break
				}
			}
		} else if s.busy[t.peer] == t {
			s.busy[t.peer] = nil
			e.grantNext(s, t.peer)
		}
	}
	if e.cfg.OnComplete != nil {
		e.cfg.OnComplete(t)
	}
}

func (e *Engine) grantNext(s *backendSlot, rank int) {
	for len(s.queue[rank]) > 0 && s.busy[rank] == nil {
		next := s.queue[rank][0]
		s.queue[rank] = s.queue[rank][1:]
		e.grant(next)
		// Read in the next Progress, not this one's pass: reading
		// on would empty the channel before any new CTS left, and
		// the sender's copy in and this side's copy out would take
		// turns instead of overlapping.
		next.grantedIn = e.pass
	}
}

// PeerFailed fails every transfer with rank, whose process is gone, and
// every later one.
func (e *Engine) PeerFailed(rank int, err error) {
	if rank < 0 || rank >= e.cfg.Size {
		return
	}
	var pe *PeerError
	if !errors.As(err, &pe) {
		err = &PeerError{Rank: rank, PID: e.peers[rank].pid, Err: err}
	}
	if e.peers[rank].gone == nil {
		e.peers[rank].gone = err
	}
	if e.peers[rank].exited != nil {
		e.peers[rank].exited = nil // failed now, not after its grace
		e.exiting--
	}
	for _, t := range e.live {
		if t.peer == rank && t.state != stDone {
			if t.s != nil {
				t.s.b.Abort(t)
			}
			e.complete(t, err)
		}
	}
}

// peerAlive returns a *PeerError when rank's process has exited.
func (e *Engine) peerAlive(rank int) error {
	p := &e.peers[rank]
	if p.gone != nil {
		return p.gone
	}
	if p.pidfd < 0 {
		if p.pid < 0 || !e.openPidfd(rank) {
			return nil // no pidfd: rely on the channel's own errors
		}
	}
	e.pfd[0] = unix.PollFd{Fd: int32(p.pidfd), Events: unix.POLLIN}
	n, err := unix.Poll(e.pfd[:], 0)
	if err == nil && n == 1 && e.pfd[0].Revents&unix.POLLIN != 0 {
		return &PeerError{Rank: rank, PID: p.pid, Err: errors.New("process exited")}
	}
	return nil
}

// openPidfd opens a pidfd on rank's process. A pid that does not exist
// here is not taken as a death: it may live in another PID namespace, so the
// rank is marked as having no usable pid, and the Engine relies on the
// control channel's errors (the endpoint's liveness) for it.
func (e *Engine) openPidfd(rank int) bool {
	p := &e.peers[rank]
	pid := e.peerPID(rank)
	if pid <= 0 {
		return false // unknown for now
	}
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		p.pid = -1
		return false
	}
	p.pidfd, p.pid = fd, pid
	return true
}

// send queues a control packet for t's peer; the packet buffer of t holds
// the payload (n bytes after the header) already.
func (e *Engine) send(t *Transfer, typ pktType, status uint8, n int, length int64) {
	e.sendWithSource(t, typ, status, n, length, t.id)
}

// sendDone sends the DONE of a transfer that moved length bytes here in
// moving. The time goes in the header's source word, which no DONE needs
// (the receiver looks the transfer up by its own id), rather than in a
// payload: a 32-byte DONE fits in the line of its fastbox's flag, and the
// peer reads it with one cache miss, not two.
func (e *Engine) sendDone(t *Transfer, length int64, moving time.Duration) {
	e.sendWithSource(t, pktDone, statusOK, 0, length, uint64(max(moving, 1)))
}

func (e *Engine) sendWithSource(t *Transfer, typ pktType, status uint8, n int, length int64, src uint64) {
	p := t.packet()
	var kind uint8 // 0: no backend (the RTS named one unknown here)
	if t.s != nil {
		kind = t.s.id
	}
	putHeader(p, typ, kind, status, n, src, t.peerID, length)
	t.pktLen = hdrLen + n
	if t.pktPending {
		return // already in the outbox: the newer packet replaces it
	}
	if len(e.outbox) == 0 {
		ok, err := e.cfg.Control.Send(t.peer, p[:t.pktLen])
		if err != nil {
			e.PeerFailed(t.peer, err)
			return
		}
		if ok {
			return
		}
	}
	t.pktPending = true
	e.outbox = append(e.outbox, t)
}

func (e *Engine) flush() {
	i := 0
	for ; i < len(e.outbox); i++ {
		t := e.outbox[i]
		ok, err := e.cfg.Control.Send(t.peer, t.pkt[:t.pktLen])
		if err != nil {
			t.pktPending = false
			e.PeerFailed(t.peer, err)
			e.recycle(t)
			continue
		}
		if !ok {
			break
		}
		t.pktPending = false
		e.recycle(t)
	}
	n := copy(e.outbox, e.outbox[i:])
	clear(e.outbox[n:])
	e.outbox = e.outbox[:n]
}

// Wait drives the Engine (and poll, which should deliver control packets
// to HandleControl) until t completes, and returns its error.
func (e *Engine) Wait(t *Transfer, poll func() error) error {
	for !t.Done() {
		if poll != nil {
			if err := poll(); err != nil {
				return err
			}
		}
		if err := e.Progress(); err != nil {
			return err
		}
	}
	return t.err
}

// PollFds appends to dst the descriptors that the active transfers of
// Blocker backends wait for, so that an idle caller can sleep in poll(2)
// until one is ready (with a timeout: control packets arrive elsewhere).
func (e *Engine) PollFds(dst []unix.PollFd) []unix.PollFd {
	for _, t := range e.live {
		if t.state != stActive {
			continue
		}
		if b := t.s.blocker; b != nil {
			if fd, ev := b.PollFd(t); fd >= 0 {
				dst = append(dst, unix.PollFd{Fd: int32(fd), Events: ev})
			}
		}
	}
	return dst
}

// BytesMoved returns how many payload bytes this side has moved in all, so
// that a wait loop can tell a poll that advanced a transfer from an idle one.
func (e *Engine) BytesMoved() uint64 { return e.bytes }

// CheckPeer returns a *PeerError if rank's process is known to have exited.
func (e *Engine) CheckPeer(rank int) error {
	if rank < 0 || rank >= e.cfg.Size || rank == e.cfg.Rank {
		return nil
	}
	return e.peerAlive(rank)
}

// Pending reports how many transfers are in flight.
func (e *Engine) Pending() int { return len(e.live) }

// InChannel returns how many sends completed for their users while their
// bytes are still in a [Buffered] channel, before the receiver's DONE. A
// caller about to Close drives the Engine until there are none, so that
// the receivers can finish reading.
func (e *Engine) InChannel() int {
	n := 0
	for _, t := range e.live {
		if t.handedBack && t.state != stDone {
			n++
		}
	}
	return n
}

// Drain drives the Engine (and poll, as for Wait) until no send that
// completed with its bytes in a [Buffered] channel still awaits its
// receiver's DONE, or that receiver is found gone (Progress checks the
// peers of idle transfers): a caller about to Close (and its process about
// to exit) calls it first, so that the receiver can read what the send
// promised, as MPI_Finalize delivers every completed send. A receiver that
// lives but never reads holds it, as it would hold MPI_Finalize. After
// drainSpin polls it yields the CPU between them, to the receiver it waits
// for.
func (e *Engine) Drain(poll func() error) error {
	for idle := 0; e.InChannel() > 0; idle++ {
		if poll != nil {
			if err := poll(); err != nil {
				return err
			}
		}
		if err := e.Progress(); err != nil {
			return err
		}
		if idle >= drainSpin {
			_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
	return nil
}

// drainSpin is how many polls Drain makes before it starts yielding: as
// many as the endpoint's waiters (nemesis/liveness.go says why).
const drainSpin = 4096

// Close fails the transfers in flight and releases every backend.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	for _, t := range e.live {
		if t.state != stDone {
			if t.s != nil {
				t.s.b.Abort(t)
			}
			e.complete(t, ErrClosed)
		}
	}
	e.live = nil
	var first error
	for _, s := range e.named {
		if err := s.b.Close(); err != nil && first == nil {
			first = err
		}
	}
	for i := range e.peers {
		if e.peers[i].pidfd >= 0 {
			unix.Close(e.peers[i].pidfd)
			e.peers[i].pidfd = -1
		}
	}
	if e.cfg.Dir != "" {
		os.Remove(e.cfg.Dir) // only once empty: the last rank removes it
	}
	return first
}

// newTransfer takes a transfer from the pool, or allocates one while the
// pool is empty (the first transfers, or callers that never Release). The
// iovec list is copied into storage the transfer keeps, so that a caller
// may build it in a temporary.
func (e *Engine) newTransfer(peer int, side Side, iov [][]byte) *Transfer {
	var t *Transfer
	if n := len(e.pool); n > 0 {
		t = e.pool[n-1]
		e.pool[n-1] = nil
		e.pool = e.pool[:n-1]
		*t = Transfer{iov: t.iov[:0], remote: t.remote[:0], pkt: t.pkt}
	} else {
		t = &Transfer{}
	}
	t.e, t.peer, t.side = e, peer, side
	t.iov = append(t.iov, iov...)
	return t
}

// drop returns a transfer that never went live to the pool.
func (e *Engine) drop(t *Transfer) {
	t.released = true
	e.recycle(t)
}

func (e *Engine) goLive(t *Transfer) {
	t.inLive = true
	e.live = append(e.live, t)
}

// Release gives a completed transfer back to the Engine, which reuses it,
// with its packet buffer and iovec storage, for a later StartSend or
// StartRecv: in steady state a large message then allocates nothing. The
// caller must not touch t afterwards. A transfer never released is simply
// garbage collected.
func (e *Engine) Release(t *Transfer) error {
	if t == nil || t.e != e {
		return errors.New("lmt: Release of a transfer this engine did not start")
	}
	if !t.Done() {
		return fmt.Errorf("lmt: Release of %v still in flight", t)
	}
	if t.released {
		return fmt.Errorf("lmt: %v released twice", t)
	}
	t.released = true
	e.recycle(t)
	return nil
}

// recycle pools t once it is released and the engine holds it nowhere.
func (e *Engine) recycle(t *Transfer) {
	if !t.released || t.inLive || t.pktPending || e.closed {
		return
	}
	clear(t.iov) // do not keep the caller's buffers alive
	t.User = nil
	e.pool = append(e.pool, t)
}

func (e *Engine) register(t *Transfer) {
	var idx uint32
	if n := len(e.free); n > 0 {
		idx = e.free[n-1]
		e.free = e.free[:n-1]
	} else {
		idx = uint32(len(e.table))
		e.table = append(e.table, nil)
		e.gens = append(e.gens, 0)
	}
	e.gens[idx]++
	e.table[idx] = t
	t.id = uint64(e.gens[idx])<<32 | uint64(idx)
}

func (e *Engine) unregister(t *Transfer) {
	idx := uint32(t.id)
	if int(idx) < len(e.table) && e.table[idx] == t {
		e.table[idx] = nil
		e.free = append(e.free, idx)
	}
}

func (e *Engine) lookup(id uint64) *Transfer {
	idx := uint32(id)
	if int(idx) >= len(e.table) || e.gens[idx] != uint32(id>>32) {
		return nil
	}
	return e.table[idx]
}

func nonEmpty(iov [][]byte) int {
	n := 0
	for _, b := range iov {
		if len(b) > 0 {
			n++
		}
	}
	return n
}

func iovLen(iov [][]byte) int64 {
	var n int64
	for _, b := range iov {
		n += int64(len(b))
	}
	return n
}

// String names a transfer in error messages and logs.
func (t *Transfer) String() string {
	name := "?"
	if t.s != nil {
		name = t.s.name
	}
	return t.side.String() + " " + name + " transfer with rank " + strconv.Itoa(t.peer)
}
