package engine

import (
	"fmt"

	"github.com/knemesis/knemesis/arena"
	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
)

// "arena" and "auto-arena" send from buffers of the job's shared arena
// (nemesis.Endpoint.Alloc, as an MPI program sends from MPI_Alloc_mem):
// "arena" forces the LMT's arena backend for every message (RTS, the
// receiver's copy, DONE), "auto-arena" is the automatic choice as a
// program gets it from package auto, where a message past a fastbox's
// payload goes by the endpoint's own single copy (a descriptor, the
// receiver's copy, a completion slot: no LMT). Both run on request only:
// ordinary buffers, the default sweep's, cannot go by the arena, so they
// are no single backend to compare auto with there.
// `lmtbench pingpong --backends auto-arena,arena,memcpy` reads both paths
// against the memcpy reference in one run, and
// `--backends auto,auto-arena,memcpy` both kinds of buffer.
func init() {
	id, _ := lmt.IdentityOf(lmt.Arena)
	register(Backend{
		Name:        lmt.Arena,
		Summary:     "LMT: " + id.Summary + "; send buffers from Endpoint.Alloc",
		OnRequest:   true,
		Check:       func() error { return lmtRegistered(lmt.Arena) },
		SharedBytes: func(int) int { return 0 },
		Open:        func(p Peer) (Engine, error) { return openArena(p, false) },
	})
	register(Backend{
		Name:        "auto-arena",
		Summary:     "the automatic choice (as auto) for send buffers from the job's shared arena (Endpoint.Alloc)",
		OnRequest:   true,
		Check:       func() error { return nil },
		SharedBytes: func(int) int { return 0 },
		Open:        func(p Peer) (Engine, error) { return openArena(p, true) },
	})
	id, _ = lmt.IdentityOf(lmt.ArenaCopy)
	register(Backend{
		Name:        lmt.ArenaCopy,
		Summary:     "LMT: " + id.Summary + "; ordinary send buffers, a job with an arena, messages up to 256 KiB",
		OnRequest:   true,
		Check:       func() error { return lmtRegistered(lmt.ArenaCopy) },
		SharedBytes: func(int) int { return 0 },
		Open:        openArenaCopy,
	})
	register(Backend{
		Name:        "auto-copy",
		Summary:     "the automatic choice (as auto) for ordinary send buffers in a job with an arena, where it also weighs arena-copy",
		OnRequest:   true,
		Check:       func() error { return nil },
		SharedBytes: func(int) int { return 0 },
		Open:        func(p Peer) (Engine, error) { return openArenaJob(p, "auto-copy", true) },
	})
}

// openArenaCopy forces arena-copy for every message, sent from ordinary
// memory, in a job with an arena (openArenaJob).
func openArenaCopy(p Peer) (Engine, error) {
	if p.MaxSize > arena.SlotSize {
		return nil, fmt.Errorf("%s: carries messages up to %d bytes, the run goes to %d: give --sizes up to 256K", lmt.ArenaCopy, arena.SlotSize, p.MaxSize)
	}
	return openArenaJob(p, lmt.ArenaCopy, false)
}

// openArenaJob joins a job with an arena whose quarter holds 8 arena-copy
// slots (as many messages in flight; a 9th forced onto arena-copy fails,
// one auto chose goes another way) and attaches auto, or the named
// backend alone; the send buffers are ordinary memory.
func openArenaJob(p Peer, name string, automatic bool) (Engine, error) {
	e, err := joinArena(p, name, 4*8*(arena.SlotSize+4096), automatic)
	if err != nil {
		return nil, err // not a nil *lmtEngine in a non-nil Engine
	}
	return e, nil
}

// joinArena joins a 2-rank job with arenaSize bytes of arena per rank and
// attaches auto, or the named backend alone.
func joinArena(p Peer, name string, arenaSize int, automatic bool) (*lmtEngine, error) {
	if p.Proc.Size != 2 {
		return nil, fmt.Errorf("%s: runs between exactly 2 processes, job has %d", name, p.Proc.Size)
	}
	ep, err := nemesis.JoinProc(p.Proc, &nemesis.Options{ArenaSize: arenaSize})
	if err != nil {
		return nil, fmt.Errorf("%s: joining the Nemesis job: %w", name, err)
	}
	var att *attach.LMT
	if automatic {
		var sel *auto.Selection
		if sel, err = auto.Attach(ep, auto.Options{CPUs: p.CPUs}); err == nil {
			att = sel.LMT
		}
	} else {
		att, err = attach.Attach(ep, attach.Options{EagerMax: 1, Prefer: []string{name}})
	}
	if err != nil {
		ep.Close()
		return nil, fmt.Errorf("%s: attaching the LMT: %w", name, err)
	}
	return &lmtEngine{ep: ep, att: att, peer: 1 - p.Proc.Rank, alloc: p.Alloc}, nil
}

// arenaEngine is an lmtEngine whose send buffers come from the arena.
type arenaEngine struct {
	*lmtEngine
	bufs [][]byte
}

// arenaFor is the arena each rank gets: its send buffer of the run's
// largest size, with room for alignment.
func arenaFor(maxSize int) int { return maxSize + 64<<10 }

func openArena(p Peer, automatic bool) (Engine, error) {
	name := lmt.Arena
	if automatic {
		name = "auto-arena"
	}
	e, err := joinArena(p, name, arenaFor(p.MaxSize), automatic)
	if err != nil {
		return nil, err
	}
	return &arenaEngine{lmtEngine: e}, nil
}

func (e *arenaEngine) SendBuffer(n int) ([]byte, error) {
	b, err := e.ep.Alloc(max(n, 1))
	if err != nil {
		return nil, err
	}
	e.bufs = append(e.bufs, b)
	return b[:n], nil
}

func (e *arenaEngine) Close() error {
	for _, b := range e.bufs {
		_ = e.ep.Free(b)
	}
	return e.lmtEngine.Close()
}
