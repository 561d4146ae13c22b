package lmt

import (
	"errors"
	"fmt"
	"strconv"
)

// backendSlot is one backend of an Engine: its identity, its flow, the
// optional interfaces it implements (asserted once here, not on every
// message), and its channel with each peer.
type backendSlot struct {
	id   uint8
	name string
	kind Flow
	flow flow
	b    Backend
	// caps are what its identity and optional interfaces ask of the
	// Engine's protocol (capability.go).
	caps capability
	// releaser is b as a [Releaser], or nil.
	releaser Releaser
	// quiescer is b as a [Quiescer], or nil: its failed transfers wait
	// for it before they complete.
	quiescer Quiescer
	// blocker is b as a Blocker, or nil.
	blocker Blocker
	// early is b as an Early stream backend, or nil (see channel.fill).
	early Early
	// copier is b as a Pull [Copier], or nil: its sender completes once
	// its copy holds the message, and the copy goes back when it leaves.
	copier Copier
	// chunk bounds what one Step moves: Config.Chunk, or what b asks for
	// as a [Chunker].
	chunk int
	// offer is the room an [Offloader]'s offer takes ahead of b's handle
	// in the RTS (rails_offload.go), 0 without one.
	offer int
	chans []channel // by peer rank
}

// Engine runs the large-message transfers of one process. It is driven by
// one goroutine: none of its methods may be called concurrently.
type Engine struct {
	cfg    Config
	env    Env
	slots  [256]*backendSlot // by backend id, as RTS packets name them
	named  []*backendSlot    // the registered ones, for lookups by name
	prefer []*backendSlot
	peers  []peer
	rails  []railRates // by peer rank: what Split receives measured (rails.go)

	table  // transfer ids
	pool   // released transfers
	outbox []*Transfer

	live  []*Transfer
	bytes uint64 // moved by this side, all transfers
	// packets counts the control packets handled, which with bytes is
	// the wait loop's mark of progress (progress.go).
	packets uint64
	// polling is the poll function of the Wait or Drain in progress.
	polling func() error
	pass    uint64 // Progress calls so far
	closed  bool
}

// New creates an Engine with every registered backend.
func New(cfg Config) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	e := &Engine{cfg: cfg}
	_ = monotonic() // calibrates the clock (2 ms, once a process) now, not on the first message
	e.env = Env{Rank: cfg.Rank, Size: cfg.Size, Job: cfg.Job, Key: cfg.Key, Dir: cfg.Dir, Config: &e.cfg, PeerPID: e.peerPID}
	e.peers = make([]peer, cfg.Size)
	e.rails = make([]railRates, cfg.Size)
	for _, r := range registry {
		b, err := r.factory(&e.env)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("lmt: creating backend %s: %w", r.Name, err)
		}
		e.slots[r.ID] = e.newSlot(r, b)
		e.named = append(e.named, e.slots[r.ID])
	}
	for _, r := range registry {
		if r.Offload != "" {
			e.withOffload(e.slots[r.ID], r.Offload)
		}
		if r.Ring != "" {
			e.withRing(e.slots[r.ID], r.Ring)
		}
	}
	for _, name := range cfg.Prefer {
		if s := e.slot(name); s != nil && !s.caps.has(capRemote) {
			e.prefer = append(e.prefer, s)
		}
	}
	for _, s := range e.named {
		if s.caps.has(capRemote) {
			e.prefer = append(e.prefer, s)
		}
	}
	if len(e.prefer) == 0 {
		e.Close()
		return nil, fmt.Errorf("lmt: none of the preferred backends %v is registered (have %v)", cfg.Prefer, Backends())
	}
	return e, nil
}

// newSlot wraps backend b of registration r, with the scheduling its
// optional interfaces ask for unless a knob turns it off.
func (e *Engine) newSlot(r registration, b Backend) *backendSlot {
	s := &backendSlot{id: r.ID, name: r.Name, kind: r.Flow, flow: flowOf(r.Flow), b: b, chunk: e.cfg.Chunk}
	s.blocker, _ = b.(Blocker)
	s.quiescer, _ = b.(Quiescer)
	if r.Flow == Stream && !e.cfg.knobs.NoEarly {
		s.early, _ = b.(Early)
	}
	if c, ok := b.(Copier); ok && r.Flow == Pull {
		s.copier = c
	} else {
		s.releaser, _ = b.(Releaser)
	}
	if c, ok := b.(Chunker); ok {
		s.chunk = c.Chunk()
	}
	s.caps = capabilities(r, b, s.early != nil, e.cfg.knobs)
	s.chans = make([]channel, e.cfg.Size)
	for rank := range s.chans {
		s.chans[rank] = channel{slot: s, peer: rank}
	}
	return s
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

// channelOf returns the channel of backend id with rank, or nil when no
// backend has that id here.
func (e *Engine) channelOf(id uint8, rank int) *channel {
	if s := e.slots[id]; s != nil {
		return &s.chans[rank]
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
	return e.check(&s.chans[rank])
}

func (e *Engine) check(ch *channel) error {
	if !ch.checked {
		ch.refusal = e.misplaced(ch)
		if ch.refusal == nil {
			ch.refusal = ch.slot.b.Check(Peer{Rank: ch.peer, PID: e.peerPID(ch.peer)})
		}
		ch.checked = true
	}
	return ch.refusal
}

// errMisplaced is behind the refusals of misplaced: a send that finds no
// backend names the reason of one for its kind of peer before it.
var errMisplaced = errors.New("a backend for the other kind of peer")

// misplaced refuses a backend of one node for a rank on another, and a
// Remote one for a rank of this node.
func (e *Engine) misplaced(ch *channel) error {
	remote := e.cfg.Remote != nil && e.cfg.Remote(ch.peer)
	switch {
	case remote && !ch.slot.caps.has(capRemote):
		return &Unavailable{Backend: ch.slot.name, Peer: ch.peer,
			Reason: fmt.Sprintf("rank %d is on another node; %s moves bytes within a node", ch.peer, ch.slot.name),
			Fix:    "none needed: " + NetRead + " carries the messages of ranks on other nodes", Err: errMisplaced}
	case !remote && ch.slot.caps.has(capRemote):
		return &Unavailable{Backend: ch.slot.name, Peer: ch.peer,
			Reason: fmt.Sprintf("rank %d is on this node; %s reaches other nodes only", ch.peer, ch.slot.name),
			Fix:    "none needed: the backends of Config.Prefer carry the messages within a node", Err: errMisplaced}
	}
	return nil
}

func (e *Engine) peerPID(rank int) int {
	if e.cfg.PeerPID == nil || rank < 0 || rank >= e.cfg.Size {
		return 0
	}
	return e.cfg.PeerPID(rank)
}

// Pending reports how many transfers are in flight.
func (e *Engine) Pending() int { return len(e.live) }

// BytesMoved returns how many payload bytes this side has moved in all, so
// that a wait loop can tell a poll that advanced a transfer from an idle one.
func (e *Engine) BytesMoved() uint64 { return e.bytes }

// InChannel returns how many sends completed for their users while their
// bytes are still in a [Buffered] channel or a [Copier]'s copy, before the
// receiver's DONE, with the Copier sends still filling their copy. A
// caller about to Close drives the Engine until there are none, so that
// the receivers can finish reading.
func (e *Engine) InChannel() int {
	n := 0
	for _, t := range e.live {
		if t.state == stHanded || t.state == stCopied {
			n++
		}
	}
	return n
}

// Close fails the transfers in flight with ErrClosed and releases every
// backend. It drives nothing, so it cannot wait for a backend's
// operations: a transfer whose [Quiescer] is not quiet, even once the
// backends are closed, is not completed
// (its buffers may still be written) but stays in Pending, and a later
// Progress completes it with ErrClosed once its backend is quiet (the
// caller keeps polling what reports the backend's operations: the network
// module, for net-read). A caller that stops driving leaves it pending,
// never complete over a buffer still being written.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	for _, t := range e.live {
		e.abort(t, ErrClosed)
	}
	e.sweep()
	var first error
	for _, s := range e.named {
		if err := s.b.Close(); err != nil && first == nil {
			first = err
		}
	}
	// A backend's Close may have ended what kept a failing transfer
	// from being quiet (closing /dev/knem waits for its copies).
	for _, t := range e.live {
		if t.state == stFailing {
			e.quiesce(t)
		}
	}
	e.sweep()
	return first
}

// String names a transfer in error messages and logs.
func (t *Transfer) String() string {
	name := "?"
	if t.ch != nil {
		name = t.ch.slot.name
	}
	return t.side.String() + " " + name + " transfer with rank " + strconv.Itoa(t.peer)
}
