package lmt

import (
	"errors"
	"fmt"
	"strings"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/lmt/internal/knobs"
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
	Job        string // names shared objects (rings, FIFOs); required
	// Key is the job's key (package jobkey; attach passes
	// nemesis.Endpoint.JobKey): the names of the shared files the
	// backends make carry a part of it (Key.Name), so that another user
	// cannot guess them. Zero: the names are Job's alone.
	Key     jobkey.Key
	Control Control // required
	// PeerPID returns the process id of a rank, 0 when unknown: the CMA
	// backends name processes by it, and Transfer.CheckPeer looks at it.
	// A dead peer is reported by whoever drives the Engine, with
	// PeerFailed.
	PeerPID func(rank int) int
	// Arena returns rank's region of the job's shared arena as mapped in
	// this process, nil when the job has none (nemesis.Endpoint's
	// ArenaRegion): the arena backend copies out of it.
	Arena func(rank int) []byte
	// Alloc allocates n bytes of this rank's region of the arena
	// (nemesis.Endpoint.Alloc), nil when the job has none: the
	// arena-copy backend takes its slots from it, once, and reuses them.
	Alloc func(n int) ([]byte, error)
	// Remote reports whether rank is on another node; nil: every rank is
	// on this one. A remote rank is reached by the Remote backends alone
	// (NetRead), and only remote ranks by them: the Engine refuses the
	// others with an *Unavailable saying so.
	Remote func(rank int) bool
	// Net is what a Remote backend moves bytes through: in a job, the
	// nemesis endpoint, whose network module reads remote memory. The
	// backend names the interface it needs (package netmod/netread); nil
	// when the job has no rank on another node.
	Net any
	// Prefer lists backend names in order of preference; the first one
	// available with a peer carries the message. Default:
	// [DefaultPreference] (shm, vmsplice, cma, pipe, cma-write), those
	// registered. The Remote backends need no place in it: they follow
	// it, for the remote ranks they alone reach.
	Prefer []string
	// Chunk bounds the bytes one Progress call moves per transfer
	// (default 64 KiB), so that small messages keep flowing.
	Chunk int
	// CMAChunk replaces Chunk for the CMA backends (default 4 MiB): each
	// process_vm_readv or process_vm_writev costs a system call and the
	// pinning of the peer's pages beyond its copy, as much as copying
	// tens of KiB, while 4 MiB still moves in well under a millisecond
	// (docs/performance.md).
	CMAChunk int
	// Dir is a private directory for the job's FIFOs (default: the
	// FIFO backends take launch.JobDir(Job), $TMPDIR/knemesis-<job>,
	// created 0700, which the launcher removes when the job ends).
	// Ranks remove the FIFOs they made and the last one the directory;
	// only the launcher's
	// removal covers a rank killed between making a FIFO and its peer
	// opening it, so a Dir of the caller's own needs the same care.
	Dir string
	// ShmSlots and ShmSlotSize shape the shm ring (default 16 slots of 32
	// KiB in flight per ordered pair of ranks); ShmPoolSlots is how many
	// slots each rank's pool holds for all its rings together (default 64:
	// 2 MiB per rank, whatever the number of peers).
	ShmSlots, ShmSlotSize, ShmPoolSlots int
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
	// SmallBlock is the block length under which a datatype description
	// (StartSendType, StartRecvType) has its blocks packed into a staging
	// buffer and moved with their neighbours as one piece, rather than
	// named one by one to process_vm_readv or process_vm_writev; longer
	// blocks move in place (default datatype.DefaultSmallBlock, which says
	// why; 1 stages nothing). Each side stages its own blocks by its own
	// threshold, which its handle carries to the peer.
	SmallBlock int
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

	// knobs turns scheduling optimisations off for tests and benchmarks
	// (package lmt/internal/knobs).
	knobs knobs.Knobs
}

func init() {
	knobs.Set = func(cfg any, k knobs.Knobs) { cfg.(*Config).knobs = k }
}

// Defaults.
const (
	DefaultChunk        = 64 << 10
	DefaultCMAChunk     = 4 << 20
	DefaultShmSlots     = 16 // see shm.go for why not MPICH's 8
	DefaultShmSlotSize  = 32 << 10
	DefaultShmPoolSlots = 64 // see package shm for why
	DefaultPipeSize     = 1 << 20
	DefaultMinPipeSize  = 64 << 10
	DefaultMaxSegments  = 64
	PipeMaxSizeFile     = "/proc/sys/fs/pipe-max-size"
)

// WithDefaults returns c with every zero field set to its default, as an
// Engine sees it.
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}

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
	if c.ShmPoolSlots <= 0 {
		c.ShmPoolSlots = DefaultShmPoolSlots
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
	if c.SmallBlock <= 0 {
		c.SmallBlock = datatype.DefaultSmallBlock
	}
	if len(c.Prefer) == 0 {
		c.Prefer = defaultPrefer
	}
}

// MaxMaxSegments bounds Config.MaxSegments: IOV_MAX, the most iovecs one
// process_vm_readv takes. Every transfer's packet buffer has room for a
// handle of MaxSegments segments.
const MaxMaxSegments = 1024

// validate refuses a Config no Engine can run with, naming the field. Zero
// fields take their defaults; negative ones are mistakes.
func (c *Config) validate() error {
	if c.Size < 1 || c.Rank < 0 || c.Rank >= c.Size {
		return fmt.Errorf("lmt: Config.Rank %d is out of range for Config.Size %d", c.Rank, c.Size)
	}
	if c.Job == "" || c.Control == nil {
		return errors.New("lmt: Config needs a Job name and a Control channel")
	}
	if strings.ContainsAny(c.Job, "/\x00") {
		return fmt.Errorf("lmt: Config.Job %q contains a slash or a NUL: it names files in /dev/shm and the job directory", c.Job)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"Chunk", c.Chunk}, {"CMAChunk", c.CMAChunk}, {"ShmSlots", c.ShmSlots}, {"ShmSlotSize", c.ShmSlotSize}, {"ShmPoolSlots", c.ShmPoolSlots},
		{"PipeSize", c.PipeSize}, {"MinPipeSize", c.MinPipeSize}, {"PipeChunk", c.PipeChunk}, {"MaxSegments", c.MaxSegments},
		{"SmallBlock", c.SmallBlock},
	} {
		if f.v < 0 {
			return fmt.Errorf("lmt: Config.%s is %d, negative (0 takes the default)", f.name, f.v)
		}
	}
	if c.MaxSegments > MaxMaxSegments {
		return fmt.Errorf("lmt: Config.MaxSegments is %d, above IOV_MAX (%d)", c.MaxSegments, MaxMaxSegments)
	}
	if c.PipeSize > 0 && c.MinPipeSize > c.PipeSize {
		return fmt.Errorf("lmt: Config.MinPipeSize %d is above Config.PipeSize %d", c.MinPipeSize, c.PipeSize)
	}
	return nil
}
