package nemesis

import (
	"context"
	"errors"
	"math"
	"os"
	"sync/atomic"
	"time"

	"github.com/knemesis/knemesis/internal/await"
	"github.com/knemesis/knemesis/internal/memplace"
	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/nemesis/internal/ilist"
	"github.com/knemesis/knemesis/nemesis/launch"
	"golang.org/x/sys/unix"
)

// Limits and defaults of the geometry.
const (
	MaxProcs        = launch.MaxProcs
	MinCellSize     = 256
	MaxCellSize     = 1 << 20
	DefaultCellSize = 8192 // see BenchmarkCellSize and the package doc
	DefaultCells    = 64   // cells per process
	// DefaultFastboxSize is one fastbox (32-byte header + payload): a 1 KiB
	// message still fits, and a rank's DefaultFastboxes sets of 3 boxes
	// and a line ring take 226 KiB.
	DefaultFastboxSize = 2048
	// DefaultFastboxPayload is the longest message a default fastbox
	// holds.
	DefaultFastboxPayload = DefaultFastboxSize - fboxHdrSize
	maxInt                = math.MaxInt
)

// Options tune a job's geometry and timeouts. The geometry fields must be
// the same in every rank (a mismatch fails Join with ErrLayout). The zero
// value gives the defaults.
type Options struct {
	CellSize         int           // bytes per cell incl. its 40-byte header; power of two; DefaultCellSize
	Cells            int           // cells per process (its free queue); DefaultCells
	FastboxSize      int           // bytes per fastbox incl. 32-byte header, multiple of 64; <0 disables; DefaultFastboxSize
	Fastboxes        int           // fastbox sets per process: the most peers it sends to through fastboxes; DefaultFastboxes, at most size-1
	JoinTimeout      time.Duration // how long Join waits with no progress (no rank joining, no segment); 30 s
	LivenessInterval time.Duration // how often a blocked call checks that peers live; 10 ms
	Dir              string        // where the segment file lives; /dev/shm
	Net              *Net          // ranks on other nodes and the module that reaches them; nil: one node (see netmod.go)
	// ArenaSize is the bytes of shared arena each rank gets for Alloc
	// (rounded up to pages; 0: none). The job's arena, Size × ArenaSize,
	// is part of its segment: reserved at Join, gone when the job is.
	ArenaSize int
	// JobKey is the job's secret (package jobkey), the same on every rank;
	// when zero, the launcher's (jobkey.Env) if it set one. The segment's
	// name derives from it (identity.go); netmod/ofinet's Join sets it
	// under PMIx and keys its MAC with it.
	JobKey jobkey.Key
}

func (o *Options) layout(size int) layout {
	l := layout{nprocs: size, cellSize: DefaultCellSize, cellsPerProc: DefaultCells, fastboxSize: DefaultFastboxSize, fastboxes: DefaultFastboxes}
	if o.Fastboxes > 0 {
		l.fastboxes = o.Fastboxes
	}
	if o.CellSize != 0 {
		l.cellSize = o.CellSize
	}
	if o.Cells != 0 {
		l.cellsPerProc = o.Cells
	}
	if o.FastboxSize > 0 {
		l.fastboxSize = o.FastboxSize
	}
	l.fastboxes = min(l.fastboxes, size-1)
	l.arenaSize = arenaPages(o.ArenaSize)
	if o.FastboxSize < 0 || l.fastboxes == 0 {
		l.fastboxSize, l.fastboxes = 0, 0
	}
	return l
}

// Cell kinds.
const (
	kindMsg     = 1 // first (often only) cell of an eager message
	kindCont    = 2 // continuation of a multi-cell message
	kindRTS     = 3 // LMT request to send
	kindControl = 4 // LMT packet
	// kindFboxSetup announces the fastbox set the sender will use to the
	// receiver from now on; the cell's total names it (see fastbox.go).
	kindFboxSetup = 5
	kindAM        = 6 // active message (see am.go)
	kindAgg       = 7 // several whole messages in one cell (see aggregate.go)
	kindArena     = 8 // descriptor of a message in the sender's arena (see arenasend.go)
)

// peer is what an endpoint knows about one rank, itself included.
type peer struct {
	recvQ   queue // the rank's receive queue (we enqueue on it)
	freeQ   queue // the rank's free queue (we return its cells there)
	fbOut   [fboxSlots]*fboxHdr
	fbOutPl [fboxSlots][]byte
	fbIn    [fboxSlots]*fboxHdr
	fbInPl  [fboxSlots][]byte
	bell    *atomic.Uint64 // the word of the rank's bell that holds our bit
	bellBit uint64
	sleep   *atomic.Uint32 // the rank's sleep word: non-zero while it dozes
	// net: on another node, reached through the network module; next to
	// sendSeq, so that the send path's test of it costs no other line.
	net       bool
	netClosed bool   // (net) said goodbye: its silence is a normal exit
	sendSeq   uint32 // next sequence number to this rank
	recvSeq   uint32 // next sequence number expected from this rank
	// The pair's line rings (linebox.go): lnOut to the rank, with the
	// slots filled (lnSent) and known consumed (lnFree) so far; lnIn from
	// the rank, with the slots consumed here (lnRecv).
	lnOut          *lineRing
	lnIn           *lineRing
	lnSent, lnFree uint32
	lnRecv         uint32
	// The Poll count and holdClock time at which the send held for
	// the rank's box began to wait (hold.go): one at a time, the lone
	// send of the rank's window.
	heldAt    uint32
	heldSince int64
	// released counts the rank's messages consumed here, their fastboxes
	// emptied: the acknowledgment every fastbox to the rank carries. It
	// moves only once a message's handler has returned, and no handler
	// polls, so it never covers a box still full.
	released uint32
	// acked is the rank's latest acknowledgment of our messages.
	acked   uint32
	asm     assembly
	pid     int
	dead    error  // set once the rank is known gone
	expectN int32  // posted receives naming this rank
	expectI int32  // index in Endpoint.expected, or -1
	probes  uint16 // LineLatency calls with this rank so far
	holdOff uint16 // sends to the rank that take cells before one waits for its fastbox again (hold.go)
}

// assembly tracks a multi-cell message from one source whose continuation
// cells are still arriving.
type assembly struct {
	req *Request // matched receive, or
	ux  *uxMsg   // unexpected message buffer
	got int      // bytes received so far
}

// Endpoint is one rank's attachment to a job. It is not safe for concurrent
// use: one goroutine drives it (as one MPI process does).
type Endpoint struct {
	seg   *segment
	rank  int
	size  int
	job   string
	opts  Options
	recvQ queue
	freeQ queue
	peers []peer
	sendq []ilist.List[Request] // per destination: sends not yet fully put in cells

	posted    ilist.List[Request] // posted receives, in order
	unexp     ilist.List[uxMsg]   // unexpected messages, in arrival order
	uxPool    ilist.List[uxMsg]   // free unexpected-message records
	expected  []int32             // sources named by posted receives
	wildcards int                 // posted AnySource receives (+ wildcard probes)
	netExpect int                 // posted receives (and probes) naming a remote rank
	sendsOut  int                 // requests in sendq
	sendDsts  []int32             // destinations whose sendq is not empty
	strategy  Strategy            // builds packets from the sendq windows (window.go)
	hold      int                 // strategy.holdMax: sends up to this wait for a busy fastbox
	batching  bool                // between Batch and Flush: every send waits in its window
	packing   bool                // an aggregate cell is being filled (aggregate.go)
	releasing bool                // Flush or Close: no send waits for its fastbox (hold.go)
	polls     uint32
	// matched counts the messages that found their posted receive: a
	// Poll that matched one stops taking eager messages once no receive
	// is left posted (see satisfied).
	matched, pollMatched uint32
	fbNext               int              // next fastbox set of this rank's pool to claim
	fbActive             []int32          // sources whose fastbox set to this rank is attached
	bells                []*atomic.Uint64 // this rank's bell
	sleep                *atomic.Uint32   // this rank's sleep word

	net      *netPath // remote peers, when the job spans nodes (netmod.go)
	lmt      LMT
	lmtMeter LMTMeter  // lmt, when it can tell a Poll that moved payload
	lmtFds   LMTPoller // lmt, when its transfers may wait on descriptors
	lmtTypes bool      // lmt takes typed requests (LMTDatatypes)
	pollFds  []unix.PollFd
	probing  probe     // what a blocked Probe waits for (wait.go)
	am       AMHandler // one-sided layer (package rma), see am.go
	amMeter  AMMeter   // am, when it makes progress that comes in no packet
	amHeld   []heldAM  // active messages that came before the handler
	scratch  []byte    // private copies of peer-written packets for their parsers (trust.go)
	eagerMax int
	// chooser, when the LMT is one, decides for messages of more than
	// chooseAbove bytes up to eagerMax (chooseAbove == eagerMax: never).
	chooser     LMTChooser
	chooseAbove int
	// arrived counts the packets taken in, from the receive queue or a
	// fastbox: a blocked call that sees it move knows a Poll did
	// something, and must not sleep before looking at what it waits for.
	arrived  uint64
	arena    arena      // this rank's region of the shared arena (arena.go)
	arenaOut arenaSends // sends whose receivers copy them out of the arena (arenasend.go)
	lmtArena LMTArena   // lmt, when it claims some arena sends

	live    liveness
	crashed error // the first rank found dead without having closed
	nGone   int   // ranks found gone
	fatal   error
	closed  bool
	blocker Request // for blocking Send/Recv
	partner Request // Sendrecv's send, beside blocker's receive (reqset.go)
	set     waitSet // the request set WaitAll or WaitAny waits on (reqset.go)
	stats   Stats

	segOwner int        // the rank that created the segment: 0 on one node
	key      jobkey.Key // the job's (identity.go)

	// placement says where this rank's arena region lives (placement.go).
	placement memplace.Result
}

// Stats counts what went which way, for tests and tuning.
type Stats struct {
	FastboxMsgs   uint64 // messages sent through a fastbox
	LineMsgs      uint64 // of FastboxMsgs, those that took a line record (linebox.go)
	AckedBoxes    uint64 // fastboxes known empty by the receiver's acknowledgment, flag unread
	FastboxRTS    uint64 // LMT RTS sent through a fastbox (also counted in RTS)
	FastboxCtrl   uint64 // LMT control packets sent through a fastbox
	QueueMsgs     uint64 // messages sent through the queue (eager, one or more cells)
	Cells         uint64 // cells sent (messages, continuations, RTS, control)
	RTS           uint64 // messages handed to the LMT
	Unexpected    uint64 // messages that arrived before their receive
	SeqFromFbox   uint64 // fastbox messages a queue cell found ahead of it
	FullFboxScans uint64 // Polls that visited every attached fastbox set
	FastboxSets   uint64 // fastbox sets claimed from this rank's pool
	Dozes         uint64 // times a blocked call slept until woken (or a timeout)
	Woken         uint64 // dozes that a waker ended before their timeout
	Reaped        uint64 // cells taken back from the queues of gone ranks
	Distrusted    uint64 // ranks failed here for writing a corrupt value (trust.go)
	Yields        uint64 // times a blocked call gave its CPU away
	// AggregateCells and Aggregated: cells that carried several whole
	// messages (the Aggregate strategy), and the messages they carried.
	AggregateCells uint64
	Aggregated     uint64
	PackedCtrl     uint64 // LMT control packets that left in an aggregate cell
	// ArenaSends, ArenaRecvs and ArenaBytes: messages from arena
	// buffers sent and received here as a descriptor, and the bytes
	// this rank copied out of its senders' arenas, once each
	// (arenasend.go).
	ArenaSends uint64
	ArenaRecvs uint64
	ArenaBytes uint64
}

// Stats returns the counters of this endpoint.
func (ep *Endpoint) Stats() Stats { return ep.stats }

// Join attaches this process to job as rank of size, creating the segment
// when rank is 0 and waiting for all others to join. The wait fails when
// it stops advancing: no segment, or no rank joining, for
// Options.JoinTimeout (a slow job still joining is not failed), or at
// once when the segment's creator dies.
// o may be nil.
func Join(job string, rank, size int, o *Options) (*Endpoint, error) {
	if o == nil {
		o = &Options{}
	}
	if err := validJobName(job); err != nil {
		return nil, err
	}
	if size < 1 || size > MaxProcs {
		return nil, errorf(ErrInvalidArg, "job size %d, want 1..%d", size, MaxProcs)
	}
	if rank < 0 || rank >= size {
		return nil, errorf(ErrInvalidRank, "rank %d of a job of %d", rank, size)
	}
	l := o.layout(size)
	if err := l.check(); err != nil {
		return nil, err
	}
	local, node, err := o.netSetup(rank, size)
	if err != nil {
		return nil, err
	}
	owner := firstLocal(local)
	opts := *o
	if opts.JoinTimeout <= 0 {
		opts.JoinTimeout = 30 * time.Second
	}
	if opts.LivenessInterval <= 0 {
		opts.LivenessInterval = 10 * time.Millisecond
	}
	if opts.Dir == "" {
		opts.Dir = "/dev/shm"
	}
	given, err := keyOf(o)
	if err != nil {
		return nil, err
	}
	s, key, err := openSegment(opts.Dir, segmentName(job, given, o, node), l, given, rank, owner, opts.JoinTimeout)
	if err != nil {
		return nil, err
	}
	ep := newEndpoint(s, job, rank, opts)
	ep.key = key
	ep.segOwner = owner
	ep.placeOwn()
	for i := range ep.peers {
		ep.peers[i].net = !local[i]
	}
	err = ep.join(opts.JoinTimeout)
	if err == nil && o.Net != nil {
		err = ep.joinNet()
	}
	if err != nil {
		if rank == owner {
			s.unlink()
		}
		ep.live.close()
		s.unmap()
		return nil, err
	}
	return ep, nil
}

// openSegment creates the segment (rank owner) or joins it, and returns
// the job's key (identity.go).
func openSegment(dir, name string, l layout, given jobkey.Key, rank, owner int, stall time.Duration) (*segment, jobkey.Key, error) {
	if rank == owner {
		key, err := creatorKey(given)
		if err != nil {
			return nil, key, err
		}
		s, err := createSegment(dir, name, l, key)
		return s, key, err
	}
	s, err := joinSegment(dir, name, l, rank, owner, stall)
	if err != nil {
		return nil, jobkey.Key{}, err
	}
	key, err := s.joinKey(given, rank)
	if err != nil {
		s.unmap()
	}
	return s, key, err
}

// JoinProc joins the job the launcher started this process in.
func JoinProc(p launch.Proc, o *Options) (*Endpoint, error) {
	return Join(p.Job, p.Rank, p.Size, o)
}

func newEndpoint(s *segment, job string, rank int, o Options) *Endpoint {
	ep := &Endpoint{seg: s, rank: rank, size: s.nprocs, job: job, opts: o, eagerMax: maxInt, chooseAbove: maxInt, strategy: Straightforward, hold: -1}
	me := s.proc(rank)
	ep.recvQ, ep.freeQ = queue{sh: &me.recv}, queue{sh: &me.free}
	ep.peers = make([]peer, ep.size)
	ep.sendq = make([]ilist.List[Request], ep.size)
	ep.expected = make([]int32, 0, ep.size)
	ep.sendDsts = make([]int32, 0, ep.size)
	ep.bells, ep.sleep = s.bellsOf(rank), s.sleepWord(rank)
	for i := range ep.peers {
		p := &ep.peers[i]
		pb := s.proc(i)
		p.recvQ, p.freeQ = queue{sh: &pb.recv}, queue{sh: &pb.free}
		p.expectI = -1
		p.bell, p.bellBit = s.bellWord(i, rank/64), 1<<(rank%64)
		p.sleep = s.sleepWord(i)
	}
	ep.arena.init(s.region(rank))
	ep.attachStatic()
	// The first reading of the clock calibrates it, spinning for
	// milliseconds: here, not in the first send held for its box.
	holdClock()
	return ep
}

// join announces this rank and waits until every rank has, so that each
// peer's PID is known (for liveness and for CMA) before the first message.
// The last rank to arrive removes the segment's name, and the creator
// stops serving it: from then on the memory (a memfd) lives exactly as
// long as some rank maps it, and a crash can leave nothing behind in
// /dev/shm.
func (ep *Endpoint) join(stall time.Duration) error {
	s := ep.seg
	s.publishNamespaces(ep.rank)
	s.proc(ep.rank).pid.Store(int32(os.Getpid()))
	if int(s.hdr.joined.Add(1)) == ep.localRanks() {
		s.unlink()
	}
	missing := -1
	look := func() (uint64, bool, error) {
		var joined uint64
		missing = -1
		for i := range ep.peers {
			switch {
			case ep.peers[i].net:
			case s.proc(i).pid.Load() != 0:
				joined++
			case missing < 0:
				missing = i
			}
		}
		if missing >= 0 && ep.rank != ep.segOwner && s.creatorVisible() && !creatorAlive(int(s.hdr.creatorPID)) {
			return joined, false, errorf(ErrPeerDead, "rank %d of job %q: rank %d, which created the segment, died while rank %d had not joined", ep.rank, ep.job, ep.segOwner, missing)
		}
		return joined, missing < 0, nil
	}
	err := await.Poll{Stall: stall, MinSleep: 20 * time.Microsecond, MaxSleep: 2 * time.Millisecond}.Until(context.Background(), look)
	if se := (*await.StallError)(nil); errors.As(err, &se) {
		return errorf(ErrJoinTimeout, "rank %d waited for rank %d of job %q to join: %d of %d ranks joined, and none more for %v", ep.rank, missing, ep.job, se.Count, ep.localRanks(), se.Stall)
	}
	if err != nil {
		return err
	}
	for i := range ep.peers {
		ep.peers[i].pid = int(s.proc(i).pid.Load())
	}
	if ep.rank == ep.segOwner {
		s.unlink() // every local rank holds the segment: stop serving it
	}
	if err := ep.checkNamespaces(); err != nil {
		return err
	}
	return ep.live.open(ep)
}

// Rank returns this process's rank.
func (ep *Endpoint) Rank() int { return ep.rank }

// Size returns the number of ranks in the job.
func (ep *Endpoint) Size() int { return ep.size }

// Job returns the job name.
func (ep *Endpoint) Job() string { return ep.job }

// PeerPID returns the process id of rank (for process_vm_readv, pidfd...).
func (ep *Endpoint) PeerPID(rank int) (int, error) {
	if err := ep.checkRank(rank, false); err != nil {
		return 0, err
	}
	if ep.peers[rank].net {
		return 0, errorf(ErrNotSupported, "rank %d is on another node: no process id here", rank)
	}
	return ep.peers[rank].pid, nil
}

// SharedMemory returns the bytes of shared memory the job's segment holds,
// as its file system counts them: SegmentSize, reserved whole when rank 0
// created it (where the file system can reserve).
func (ep *Endpoint) SharedMemory() (uint64, error) {
	if ep.closed {
		return 0, ErrClosed
	}
	return ep.seg.allocated()
}

// CellPayload is the number of payload bytes one cell carries.
func (ep *Endpoint) CellPayload() int { return ep.seg.payloadSize }

// FastboxPayload is the largest message a fastbox carries (0: no fastboxes).
func (ep *Endpoint) FastboxPayload() int { return ep.seg.fboxPayload }

// Close detaches from the job. Pending requests are abandoned. Peers that
// still wait on this rank get an error naming it once they notice it left.
func (ep *Endpoint) Close() error {
	if ep.closed {
		return nil
	}
	ep.closed = true
	if ep.sendsOut > 0 && ep.fatal == nil {
		ep.releaseHeld()
	}
	ep.seg.proc(ep.rank).closed.Store(1)
	ep.closeNet()
	if ep.rank == ep.segOwner {
		ep.seg.unlink() // in case a rank never joined
	}
	ep.live.close()
	ep.seg.unmap()
	if ep.fatal == nil {
		ep.fatal = ErrClosed
	}
	return nil
}

func (ep *Endpoint) checkRank(rank int, wildcard bool) error {
	if rank >= 0 && rank < ep.size || wildcard && rank == AnySource {
		return nil
	}
	return errorf(ErrInvalidRank, "rank %d in a job of %d", rank, ep.size)
}

func checkTag(tag int, wildcard bool) error {
	if tag >= 0 && tag <= MaxTag || wildcard && tag == AnyTag {
		return nil
	}
	return errorf(ErrInvalidTag, "tag %d, want 0..%d", tag, MaxTag)
}

// validate checks the arguments of a new request. The common case is a
// handful of compares, inlined into Isend and Irecv; anything unusual
// (wildcards, errors) goes to validateSlow.
func (ep *Endpoint) validate(r *Request, peer, tag int, wildcard bool) error {
	if r != nil && r.state != statePending && ep.fatal == nil && uint(peer) < uint(ep.size) && uint(tag) <= MaxTag {
		return nil
	}
	return ep.validateSlow(r, peer, tag, wildcard)
}

//go:noinline
func (ep *Endpoint) validateSlow(r *Request, peer, tag int, wildcard bool) error {
	switch {
	case r == nil:
		return errorf(ErrInvalidArg, "nil request")
	case ep.fatal != nil:
		return ep.fatal
	case r.state == statePending:
		return ErrRequestInUse
	}
	if err := ep.checkRank(peer, wildcard); err != nil {
		return err
	}
	return checkTag(tag, wildcard)
}

// expect counts posted receives per source, so that Poll visits the
// fastboxes of expected sources at every call (§3.2). A source joins the
// expected list with its first receive and leaves it lazily, when Poll
// finds its count at zero: a ping-pong keeps its peer listed without
// touching the list at every message.
func (ep *Endpoint) expect(src int, delta int32) {
	if src == AnySource {
		ep.wildcards += int(delta)
		return
	}
	p := &ep.peers[src]
	p.expectN += delta
	if p.net {
		ep.netExpect += int(delta)
	}
	if p.expectI < 0 && p.expectN > 0 {
		p.expectI = int32(len(ep.expected))
		ep.expected = append(ep.expected, int32(src))
	}
}

// unexpect drops the source at index i of the expected list.
func (ep *Endpoint) unexpect(i int) {
	src := ep.expected[i]
	last := ep.expected[len(ep.expected)-1]
	ep.expected[i] = last
	ep.peers[last].expectI = int32(i)
	ep.expected = ep.expected[:len(ep.expected)-1]
	ep.peers[src].expectI = -1
}

func (ep *Endpoint) finish(r *Request, n int, err error) {
	r.n, r.err, r.state = n, err, stateDone
}

// fail records an error that leaves the shared state unusable.
func (ep *Endpoint) fail(err error) error {
	if ep.fatal == nil {
		ep.fatal = err
	}
	return ep.fatal
}
