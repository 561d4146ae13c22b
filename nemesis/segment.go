package nemesis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/knemesis/knemesis/internal/await"
	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/shmfile"
	"golang.org/x/sys/unix"
)

// The segment, as every process sees it (offsets from its start; each
// process may map it at a different address, so no pointer is ever stored):
//
//	0              header (one page): magic, layout version, sizes, offsets
//	procOff        one procBlock per rank: pid, receive queue, free queue
//	bellOff        one bell per rank: its sleep word, then one bit per sender
//	fastboxOff     nprocs×fastboxes sets of fboxSlots fastboxes, grouped by
//	               the rank that sends through them (see fastbox.go)
//	cellOff        nprocs×cellsPerProc cells, grouped by owner (sender)
//	               then, when Options.ArenaSize asks for a shared arena:
//	               nprocs pages of completion slots (arenasend.go), and
//	arenaOff       nprocs×arenaSize bytes of shared arena, one region per
//	               rank (arena.go)
//
// Every part grows linearly with nprocs (the bells by nprocs/512 lines
// each, one line up to 448 ranks): the segment of a job of N ranks is
// about N × (cells + fastbox sets) bytes, see SegmentSize.
const (
	lineSize      = 64
	segMagic      = 0x5349_5345_4d45_4e4b // "KNEMESIS" read as little-endian
	layoutVersion = 13
	headerSize    = 4096
	// A cell's payload follows its 40-byte header in the same line, so a
	// message of up to 24 bytes costs the receiver one miss for the cell.
	cellHdrSize = 40
	// A fastbox's payload starts in the line of its flag: a message of up
	// to 32 bytes then costs the receiver a single cache miss.
	fboxHdrSize = 32
	// fboxSlots fastboxes per ordered pair, used in turn by sequence
	// number: an LMT packet (a DONE) still in one box leaves the others
	// free for the next message (the RTS a ping-pong answers with), which
	// would otherwise take a cell through both queues. Three, because a
	// rendezvous on a streaming backend sends three packets each way per
	// ping-pong round (RTS, then CTS and DONE for the answer): with two,
	// every RTS found its box holding the CTS its peer had not yet
	// acknowledged, and read the flag across the cores to see it empty.
	fboxSlots = 3
)

type segHeader struct {
	magic        uint64
	version      uint32
	headerSize   uint32
	nprocs       uint32
	cellSize     uint32
	cellsPerProc uint32
	fastboxSize  uint32
	fastboxes    uint32
	segSize      uint64
	procOff      uint64
	bellOff      uint64
	fastboxOff   uint64
	cellOff      uint64
	creatorPID   int32
	arenaSize    uint64        // bytes of shared arena per rank (arena.go)
	key          jobkey.Key    // the job's key (identity.go)
	ready        atomic.Uint32 // set last by the creator
	joined       atomic.Uint32 // ranks that mapped the segment
	_            [lineSize - 8]byte
	creatorNS    [nsKinds]uint64 // the creator's namespaces (namespace.go)
	_            [lineSize - 8*nsKinds]byte
}

// queueShared is the shared part of one Fig. 3 queue. Head and tail share a
// line: an enqueue on an empty queue and a dequeue of its last element each
// touch both, for one miss. The shadow head, which only the dequeuer reads
// and writes, sits on its own line so that enqueuers never false-share with
// the dequeuer walking a non-empty queue (§3.1).
type queueShared struct {
	head   atomic.Uint64
	tail   atomic.Uint64
	_      [lineSize - 16]byte
	shadow uint64 // dequeuer only
	_      [lineSize - 8]byte
}

type procBlock struct {
	pid    atomic.Int32  // written once at join
	closed atomic.Uint32 // 1 once the rank called Close
	reaper atomic.Int32  // 1 + rank of the survivor that drains this rank's receive queue once it is gone
	_      uint32
	ns     [nsKinds]uint64 // the rank's namespaces, written before pid (namespace.go)
	_      [lineSize - 16 - 8*nsKinds]byte
	// probe is written by this rank only, during Endpoint.LineLatency
	// (encoded as internal/lineprobe says).
	probe atomic.Uint64
	_     [lineSize - 8]byte
	recv  queueShared
	free  queueShared
}

// cellHdr starts every cell. Only next is written by a process other than
// the one holding the cell (an enqueuer linking behind it).
type cellHdr struct {
	next  atomic.Uint64
	owner uint32 // rank whose free queue the cell returns to; set at init
	src   uint32
	kind  uint32
	tag   int32
	seq   uint32
	len   uint32 // payload bytes in this cell
	total uint64 // message length (first cell / RTS)
}

// fboxHdr starts every fastbox. full is the flag of §3.2; the sender sets it
// after writing the rest, the receiver clears it after consuming. ack is
// the sender's acknowledgment of the messages the receiver sent it: every
// one numbered below ack is consumed and its fastbox empty again.
type fboxHdr struct {
	full  atomic.Uint32
	seq   uint32
	tag   int32
	len   uint32
	kind  uint32
	ack   uint32
	total uint64
}

// Compile-time layout checks: a change here must bump layoutVersion.
var (
	_ [cellHdrSize - unsafe.Sizeof(cellHdr{})]byte
	_ [unsafe.Sizeof(cellHdr{}) - cellHdrSize]byte
	_ [fboxHdrSize - unsafe.Sizeof(fboxHdr{})]byte
	_ [unsafe.Sizeof(fboxHdr{}) - fboxHdrSize]byte
	_ [unsafe.Sizeof(segHeader{}) - 4*lineSize]byte
	_ [4*lineSize - unsafe.Sizeof(segHeader{})]byte
	_ [unsafe.Sizeof(procBlock{}) - 6*lineSize]byte
	_ [lineSize - 16 - 8*nsKinds]byte // the namespaces fit procBlock's first line
	_ [6*lineSize - unsafe.Sizeof(procBlock{})]byte
)

// layout is the geometry every rank must agree on. fastboxes is the number
// of fastbox sets each rank owns: the peers it may send to through
// fastboxes (0 when fastboxSize is).
type layout struct {
	nprocs, cellSize, cellsPerProc, fastboxSize, fastboxes int
	arenaSize                                              int // per rank, whole pages
}

// offsets places the parts of the segment. Each part starts on a page.
func (l layout) offsets() (procOff, bellOff, fboxOff, cellOff, size uint64) {
	page := func(off uint64) uint64 { return (off + 4095) &^ 4095 }
	procOff = headerSize
	bellOff = page(procOff + uint64(l.nprocs)*uint64(unsafe.Sizeof(procBlock{})))
	fboxOff = page(bellOff + uint64(l.nprocs)*l.bellSize())
	cellOff = page(fboxOff + uint64(l.nprocs)*uint64(l.fastboxes)*l.fboxSetSize())
	size = cellOff + uint64(l.nprocs)*uint64(l.cellsPerProc)*uint64(l.cellSize)
	if l.arenaSize > 0 {
		size = page(size) + l.arenaBytes()
	}
	return
}

// bellSize is the bytes of one rank's bell: the sleep word (padded to 8
// bytes), then one bit per rank, in whole lines.
func (l layout) bellSize() uint64 {
	words := 1 + (uint64(l.nprocs)+63)/64
	return (words*8 + lineSize - 1) &^ (lineSize - 1)
}

// fboxSetSize is the bytes of one fastbox set: the fboxSlots boxes one
// ordered pair takes in turn, then its line ring (linebox.go).
func (l layout) fboxSetSize() uint64 { return fboxSlots*uint64(l.fastboxSize) + lineRingSize }

// segment is one process's mapping of the job's shared memory.
type segment struct {
	mem  []byte
	base unsafe.Pointer
	hdr  *segHeader
	layout
	procOff, bellOff, fboxOff uint64
	cellOff                   uint64
	arenaOff                  uint64         // layout.arenaOffset, read per arena message
	cellBytes                 uint64         // total bytes of cells
	cellMask                  uint64         // cellSize-1
	payloadSize               int            // cellSize - cellHdrSize
	fboxPayload               int            // fastboxSize - fboxHdrSize, or 0
	path                      string         // the job's rendezvous directory (rendezvous.go)
	srv                       *fdpass.Server // the creator's, until every local rank joined
	fd                        int            // the segment's memfd, kept for allocated
	unlinked                  bool
}

func (s *segment) proc(rank int) *procBlock {
	return (*procBlock)(unsafe.Add(s.base, s.procOff+uint64(rank)*uint64(unsafe.Sizeof(procBlock{}))))
}

// cell validates an offset read from shared memory before turning it into a
// pointer: a corrupted link gives ErrCorrupt, never an access outside the
// cell area or into the middle of a cell. The cell size is a power of two,
// so the check is a subtraction, a compare and a mask.
func (s *segment) cell(off uint64) (*cellHdr, error) {
	if !s.validCell(off) {
		return nil, s.badCell(off)
	}
	return (*cellHdr)(unsafe.Add(s.base, off)), nil
}

func (s *segment) validCell(off uint64) bool {
	rel := off - s.cellOff
	return rel < s.cellBytes && rel&s.cellMask == 0
}

// badCell is out of line so that cell inlines into the queue operations.
//
//go:noinline
func (s *segment) badCell(off uint64) error {
	return errorf(ErrCorrupt, "cell offset %#x outside [%#x, %#x) or misaligned", off, s.cellOff, s.cellOff+s.cellBytes)
}

func (s *segment) cellOffset(owner, i int) uint64 {
	return s.cellOff + (uint64(owner)*uint64(s.cellsPerProc)+uint64(i))*uint64(s.cellSize)
}

func (s *segment) payload(off uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(s.base, off+cellHdrSize)), s.payloadSize)
}

// fbox returns the box of slot in fastbox set set of rank owner, with its
// payload area. The caller has checked set < s.fastboxes.
func (s *segment) fbox(owner, set, slot int) (*fboxHdr, []byte) {
	off := s.fboxOff + (uint64(owner)*uint64(s.fastboxes)+uint64(set))*s.fboxSetSize() + uint64(slot)*uint64(s.fastboxSize)
	p := unsafe.Add(s.base, off)
	return (*fboxHdr)(p), unsafe.Slice((*byte)(unsafe.Add(p, fboxHdrSize)), s.fboxPayload)
}

// sleepWord is the futex word of rank's bell (see doze.go).
func (s *segment) sleepWord(rank int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Add(s.base, s.bellOff+uint64(rank)*s.bellSize()))
}

// bellWord is word i of rank's bell bits: bit j of word i is set by rank
// 64i+j after it filled a fastbox to rank (see fastbox.go).
func (s *segment) bellWord(rank, i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Add(s.base, s.bellOff+uint64(rank)*s.bellSize()+8+8*uint64(i)))
}

// segObject names the segment in the errors of package shmfile.
const segObject = "nemesis segment"

func segPath(dir, job string) string { return filepath.Join(dir, "knemesis-"+job) }

func validJobName(job string) error {
	if job == "" || len(job) > 200 {
		return errorf(ErrInvalidArg, "job name %q must have 1..200 characters", job)
	}
	for _, c := range job {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return errorf(ErrInvalidArg, "job name %q: only letters, digits, '-', '_' and '.' are allowed", job)
		}
	}
	return nil
}

// createSegment serves the job's name (rendezvous.go), builds the segment
// in a sealed memfd, and then hands it to every rank that asks: a joiner
// never sees a half-initialized segment, and a live job's name is never
// taken over. What a crashed job left at the name is removed first.
func createSegment(dir, job string, l layout, key jobkey.Key) (*segment, error) {
	path := segPath(dir, job)
	procOff, bellOff, fboxOff, cellOff, size := l.offsets()
	arena := uint64(l.nprocs) * uint64(l.arenaSize)
	if err := checkSpace(dir, size, arena); err != nil {
		return nil, err
	}
	// What creators of other jobs of this user left when they died
	// before their last rank joined: their names are their keys', which
	// no later job shares, so only a sweep finds them.
	fdpass.Sweep(dir, "knemesis-", segObject)
	srv, err := claimName(path)
	if err != nil {
		return nil, err
	}
	fd, err := fdpass.NewSealed("knemesis-segment", int64(size))
	if err != nil {
		srv.Close()
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.ENOMEM) {
			return nil, &SpaceError{Dir: dir, Need: size, Free: freeIn(dir), Arena: arena}
		}
		return nil, fmt.Errorf("nemesis: %w", err)
	}
	defer unix.Close(fd)
	s, err := mapSegment(fd, int(size))
	if err != nil {
		srv.Close()
		return nil, err
	}
	h := s.hdr
	h.magic, h.version, h.headerSize = segMagic, layoutVersion, headerSize
	h.nprocs, h.cellSize, h.cellsPerProc, h.fastboxSize = uint32(l.nprocs), uint32(l.cellSize), uint32(l.cellsPerProc), uint32(l.fastboxSize)
	h.fastboxes = uint32(l.fastboxes)
	h.segSize, h.procOff, h.bellOff, h.fastboxOff, h.cellOff = size, procOff, bellOff, fboxOff, cellOff
	h.arenaSize = uint64(l.arenaSize)
	h.creatorPID = int32(os.Getpid())
	h.key = key
	h.creatorNS = namespaces()
	s.srv, s.path = srv, path
	if err := s.adopt(); err != nil {
		s.unmap()
		return nil, err
	}
	s.initQueues()
	h.ready.Store(1)
	if err := srv.Serve(segServed, fd); err != nil {
		s.unmap()
		return nil, err
	}
	return s, nil
}

// processAlive says whether pid is a live process of this user. EPERM
// means that the number now belongs to another user's process: the
// rank that had it is gone (every rank of a job runs as its one uid).
func processAlive(pid int) bool {
	return unix.Kill(pid, 0) == nil
}

// creatorAlive says whether pid, the creator of a segment of ours, is a
// live process of this user. kill(2) alone does not tell under root,
// whom it answers for every process: /proc/<pid>/status gives the
// effective uid (and is readable for non-dumpable processes too).
func creatorAlive(pid int) bool {
	if !processAlive(pid) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return true // gone since, or no /proc: kill's answer stands
	}
	_, rest, ok := strings.Cut(string(b), "\nUid:")
	f := strings.Fields(rest)
	if !ok || len(f) < 2 {
		return true
	}
	return f[1] == strconv.Itoa(os.Geteuid())
}

// joinSegment maps the segment the job's owner rank publishes, waiting for
// it as long as its creator works (creatorWatch), until nothing changed for
// stall. A segment whose creator is dead is stale: rank 0 of the new job
// will replace it, so keep waiting (and say so if the wait times out).
func joinSegment(dir, job string, l layout, rank, owner int, stall time.Duration) (*segment, error) {
	path := segPath(dir, job)
	var s *segment
	var lastErr error
	creator := creatorWatch{path: path}
	err := await.Poll{Stall: stall}.Until(context.Background(), func() (uint64, bool, error) {
		var err error
		s, err = tryJoin(path, l)
		if errors.Is(err, ErrLayout) || errors.Is(err, ErrCorrupt) || errors.Is(err, shmfile.ErrNotPrivate) ||
			errors.Is(err, fdpass.ErrPeerUID) || errors.Is(err, fdpass.ErrBadFile) {
			return 0, false, err
		}
		if err != errNotYet || !errors.Is(lastErr, ErrStaleSegment) {
			lastErr = err // a stale segment removed stays the reason
		}
		return creator.progress(), err == nil, nil
	})
	if se := (*await.StallError)(nil); errors.As(err, &se) {
		return nil, errorf(ErrJoinTimeout, "rank %d waited %v for rank %d to create %s: %v", rank, se.Stall, owner, path, lastErr)
	}
	return s, err
}

var errNotYet = errors.New("segment not created yet")

func tryJoin(path string, l layout) (*segment, error) {
	fd, size, err := fetchSegment(path)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	s, err := mapSegment(fd, int(size))
	if err != nil {
		return nil, err
	}
	h := s.hdr
	if h.ready.Load() == 0 || s.creatorVisible() && !creatorAlive(int(h.creatorPID)) {
		pid := h.creatorPID
		s.unmap()
		return nil, errorf(ErrStaleSegment, "%s left by pid %d, which is gone", path, pid)
	}
	if err := s.adopt(); err != nil {
		s.unmap()
		return nil, err
	}
	if s.layout != l {
		got := s.layout
		s.unmap()
		return nil, errorf(ErrLayout, "%s has %d procs, %d-byte cells ×%d, %d-byte fastboxes ×%d sets, a %d-byte arena per rank; this process wants %d procs, %d-byte cells ×%d, %d-byte fastboxes ×%d sets, a %d-byte arena per rank",
			path, got.nprocs, got.cellSize, got.cellsPerProc, got.fastboxSize, got.fastboxes, got.arenaSize, l.nprocs, l.cellSize, l.cellsPerProc, l.fastboxSize, l.fastboxes, l.arenaSize)
	}
	s.path = path
	return s, nil
}

// mapSegment maps the segment file and keeps a descriptor of it, by which
// the segment's memory is measured once its name is gone (allocated).
func mapSegment(fd, size int) (*segment, error) {
	keep, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("nemesis: keeping a descriptor of the segment: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(keep)
		return nil, fmt.Errorf("nemesis: mapping %d bytes of shared memory: %w", size, err)
	}
	s := &segment{mem: mem, base: unsafe.Pointer(&mem[0]), fd: keep}
	s.hdr = (*segHeader)(s.base)
	return s, nil
}

// adopt reads the geometry from the header and checks that it is the one
// this code knows and that it fits in the mapping, so that no later access
// computed from it can leave the segment.
func (s *segment) adopt() error {
	h := s.hdr
	if h.magic != segMagic {
		return errorf(ErrLayout, "bad magic %#x (not a knemesis segment)", h.magic)
	}
	if h.version != layoutVersion || h.headerSize != headerSize {
		return errorf(ErrLayout, "layout version %d (header %d bytes), this code speaks version %d", h.version, h.headerSize, layoutVersion)
	}
	if h.arenaSize > maxArenaSize {
		return errorf(ErrLayout, "shared arena of %d bytes per rank, more than %d", h.arenaSize, uint64(maxArenaSize))
	}
	l := layout{int(h.nprocs), int(h.cellSize), int(h.cellsPerProc), int(h.fastboxSize), int(h.fastboxes), int(h.arenaSize)}
	if err := l.check(); err != nil {
		return err
	}
	procOff, bellOff, fboxOff, cellOff, size := l.offsets()
	if h.procOff != procOff || h.bellOff != bellOff || h.fastboxOff != fboxOff || h.cellOff != cellOff || h.segSize != size || size > uint64(len(s.mem)) {
		return errorf(ErrLayout, "offsets (%#x %#x %#x %#x, %d bytes) do not match the sizes or the %d-byte mapping", h.procOff, h.bellOff, h.fastboxOff, h.cellOff, h.segSize, len(s.mem))
	}
	s.layout = l
	s.procOff, s.bellOff, s.fboxOff, s.cellOff = procOff, bellOff, fboxOff, cellOff
	s.arenaOff = l.arenaOffset()
	s.cellBytes = uint64(l.nprocs) * uint64(l.cellsPerProc) * uint64(l.cellSize)
	s.cellMask = uint64(l.cellSize) - 1
	s.payloadSize = l.cellSize - cellHdrSize
	s.fboxPayload = 0
	if l.fastboxSize > 0 {
		s.fboxPayload = l.fastboxSize - fboxHdrSize
	}
	return nil
}

func (l layout) check() error {
	switch {
	case l.nprocs < 1 || l.nprocs > MaxProcs:
		return errorf(ErrInvalidArg, "%d processes, want 1..%d", l.nprocs, MaxProcs)
	case l.cellSize < MinCellSize || l.cellSize > MaxCellSize || l.cellSize&(l.cellSize-1) != 0:
		return errorf(ErrInvalidArg, "cell size %d, want a power of two in %d..%d", l.cellSize, MinCellSize, MaxCellSize)
	case l.cellsPerProc < 1 || l.cellsPerProc > 1<<16:
		return errorf(ErrInvalidArg, "%d cells per process, want 1..65536", l.cellsPerProc)
	case l.fastboxSize != 0 && (l.fastboxSize < 2*lineSize || l.fastboxSize > MaxCellSize || l.fastboxSize%lineSize != 0):
		return errorf(ErrInvalidArg, "fastbox size %d, want 0 or a multiple of %d in %d..%d", l.fastboxSize, lineSize, 2*lineSize, MaxCellSize)
	case l.fastboxes < 0 || l.fastboxes >= l.nprocs || (l.fastboxSize == 0) != (l.fastboxes == 0):
		return errorf(ErrInvalidArg, "%d fastbox sets of %d bytes per process in a job of %d, want 1..%d sets of a non-zero size, or none", l.fastboxes, l.fastboxSize, l.nprocs, l.nprocs-1)
	case l.arenaSize < 0 || l.arenaSize > maxArenaSize || l.arenaSize%arenaPage != 0:
		return errorf(ErrInvalidArg, "shared arena of %d bytes per rank, want whole pages up to %d", l.arenaSize, maxArenaSize)
	}
	_, _, _, _, size := l.offsets()
	if size > 1<<40 {
		return errorf(ErrInvalidArg, "segment of %d bytes is too large", size)
	}
	return nil
}

// initQueues threads every cell onto its owner's free queue.
func (s *segment) initQueues() {
	for r := 0; r < s.nprocs; r++ {
		p := s.proc(r)
		q := queue{sh: &p.free}
		for i := 0; i < s.cellsPerProc; i++ {
			off := s.cellOffset(r, i)
			c := (*cellHdr)(unsafe.Add(s.base, off))
			c.owner = uint32(r)
			if err := q.enqueue(s, off, c); err != nil {
				panic(err) // offsets computed here are valid by construction
			}
		}
	}
}

// unlink stops serving the segment and removes its name: the creator's
// server removes the directory it made, the last rank to join removes it
// by name.
func (s *segment) unlink() {
	if s.srv != nil {
		s.srv.Close()
		s.srv, s.unlinked = nil, true
	}
	if s.path != "" && !s.unlinked {
		_ = fdpass.RemoveDir(s.path, segObject)
		s.unlinked = true
	}
}

func (s *segment) unmap() {
	if s.srv != nil {
		s.srv.Close() // removes the name too: nothing serves it any more
		s.srv = nil
	}
	if s.mem != nil {
		_ = unix.Munmap(s.mem)
		_ = unix.Close(s.fd)
		s.mem, s.base, s.hdr = nil, nil, nil
	}
}

// allocated returns the bytes the file system holds for the segment (its
// blocks, as tmpfs charges them), measured, not computed from the layout.
func (s *segment) allocated() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(s.fd, &st); err != nil {
		return 0, fmt.Errorf("nemesis: stat of the segment: %w", err)
	}
	return uint64(st.Blocks) * 512, nil
}
