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
	// Prefer lists backend names in order of preference; the first one
	// available with a peer carries the message. Default:
	// [DefaultPreference] (shm, vmsplice, cma, pipe, cma-write), those
	// registered. The Remote backends need no place in it: they follow
	// it, for the remote ranks they alone reach.
	Prefer []string
	// Chunk bounds the bytes one Progress call moves per transfer
	// (default 64 KiB), so that small messages keep flowing.
	Chunk int
	// Backends carries the settings of the backends that have their own
	// (package pipe's pipe sizes, cma's chunk, netread's network): each
	// backend's package defines their type, refuses bad values in its
	// Validate and finds them with [SettingsOf]; a backend with none in
	// the list takes its defaults.
	Backends []Settings
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
	DefaultShmSlots     = 16 // see shm.go for why not MPICH's 8
	DefaultShmSlotSize  = 32 << 10
	DefaultShmPoolSlots = 64 // see package shm for why
	DefaultMaxSegments  = 64
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
	if c.ShmSlots <= 0 {
		c.ShmSlots = DefaultShmSlots
	}
	if c.ShmSlotSize <= 0 {
		c.ShmSlotSize = DefaultShmSlotSize
	}
	if c.ShmPoolSlots <= 0 {
		c.ShmPoolSlots = DefaultShmPoolSlots
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
		{"Chunk", c.Chunk}, {"ShmSlots", c.ShmSlots}, {"ShmSlotSize", c.ShmSlotSize}, {"ShmPoolSlots", c.ShmPoolSlots},
		{"MaxSegments", c.MaxSegments}, {"SmallBlock", c.SmallBlock},
	} {
		if f.v < 0 {
			return fmt.Errorf("lmt: Config.%s is %d, negative (0 takes the default)", f.name, f.v)
		}
	}
	if c.MaxSegments > MaxMaxSegments {
		return fmt.Errorf("lmt: Config.MaxSegments is %d, above IOV_MAX (%d)", c.MaxSegments, MaxMaxSegments)
	}
	for i, b := range c.Backends {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("lmt: Config.Backends[%d]: %w", i, err)
		}
	}
	return nil
}

// Settings are one backend's own settings, which a Config carries in
// Backends without knowing what they hold.
type Settings interface {
	// Validate refuses values no backend can run with, naming the
	// field; zero fields take the backend's defaults.
	Validate() error
}

// SettingsOf returns the settings of type T that cfg carries, or T's
// zero value (the backend's defaults) when it carries none.
func SettingsOf[T Settings](cfg *Config) T {
	for _, b := range cfg.Backends {
		if v, ok := b.(T); ok {
			return v
		}
	}
	var zero T
	return zero
}
