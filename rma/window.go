package rma

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/nemesis"
)

// Window is memory of every rank of a job that the others may put to, get
// from and update atomically. Each rank holds a part of it (possibly
// empty), addressed by byte offsets from 0. Like its endpoint, a Window
// belongs to one goroutine.
type Window struct {
	e     *engine
	id    uint32
	local []byte   // this rank's part
	sizes []int    // every rank's part, in bytes
	route []Route  // per target
	peers []remote // exposed windows: what the mechanisms need of each rank
	// mem: an allocated window's mapping, nil for an exposed window.
	mem []byte
	// parts[t]: target t's part where this rank reaches it directly
	// (route Self, Allocated or KnemAttach), else nil.
	parts [][]byte
	// attached[t]: the mapping of target t's knem region (KnemAttach).
	attached []*knem.Attachment
	// cookie of this rank's persistent knem region, 0 if none.
	cookie knem.Cookie
	// rings[t]: target t's notification ring (allocated windows; nil
	// for exposed ones), ring this rank's own.
	rings []noteRing
	ring  ringReader

	inflight []int // operations started toward each target and not completed
	total    int
	notes    noteQueue
	phase    uint64 // collective steps taken
	freed    bool

	// placed says where this rank's part lives (placement.go).
	placed string
}

// remote is what an exposed window knows of another rank's part.
type remote struct {
	base   uintptr // address in the rank's address space
	pid    int
	pidns  uint64
	cookie knem.Cookie
}

// Options tune window creation; nil gives the defaults.
type Options struct {
	// Prefer lists, in order, the mechanisms an exposed window may use
	// toward each target: some of KnemAttach, Knem, CMA and AM. AM,
	// which needs nothing but the Nemesis queues, is always the last
	// resort. Default: KnemAttach, Knem, CMA, AM.
	Prefer []Mechanism
	// Dir is where Allocate makes the directory over which rank 0 hands
	// the window to the others: /dev/shm by default.
	Dir string
}

var defaultPrefer = []Mechanism{KnemAttach, Knem, CMA, AM}

func (o *Options) prefer() []Mechanism {
	if o == nil || len(o.Prefer) == 0 {
		return defaultPrefer
	}
	return o.Prefer
}

func (o *Options) dir() string {
	if o == nil || o.Dir == "" {
		return "/dev/shm"
	}
	return o.Dir
}

// newWindow registers a window under the next creation number, which is
// the same in every rank: windows are created collectively, in order.
func (e *engine) newWindow() *Window {
	w := &Window{e: e, id: uint32(len(e.wins)), sizes: make([]int, e.size),
		route: make([]Route, e.size), inflight: make([]int, e.size)}
	e.wins = append(e.wins, w)
	return w
}

// Rank is this rank's number in the window's job, 0 ≤ Rank() < Ranks().
func (w *Window) Rank() int { return w.e.rank }

// Ranks is the number of ranks sharing the window.
func (w *Window) Ranks() int { return w.e.size }

// Local is this rank's part of the window. Its bytes change under remote
// puts and atomics: read it after a Fence, a Notification or an exchange
// of messages that orders the access (see the package doc).
func (w *Window) Local() []byte { return w.local }

// Size is the size of rank's part of the window in bytes.
func (w *Window) Size(rank int) int { return w.sizes[rank] }

// Route says how operations toward target travel, and why the preferred
// mechanisms before it were not used.
func (w *Window) Route(target int) Route { return w.route[target] }

// addr is the address the 8-byte alignment of atomics is judged on: the
// target's own, where an exposed window's atomics run.
func (w *Window) addr(target int) uintptr {
	if w.mem != nil {
		return 0 // parts start on page boundaries of the mapping
	}
	return w.peers[target].base // an attachment keeps the page offset
}

// atomicByAM: atomics toward target are executed by the target itself.
func (w *Window) atomicByAM(target int) bool {
	return !w.route[target].Mechanism.direct()
}

// step advances op: one copy (a CMA chunk at most), or as many packets as
// find cells, then the notification of a PutNotify. more: op has work
// left that must wait.
func (w *Window) step(op *Op) (more bool, err error) {
	if op.kind == opAtomic {
		return w.stepAtomic(op)
	}
	if op.notify && w.rings != nil && op.target != w.e.rank {
		return w.stepRing(op), nil
	}
	if !op.issued {
		switch {
		case op.n == 0:
		case w.route[op.target].Mechanism.direct():
			w.copyLocal(op)
		default:
			if more, err := w.stepRemote(op); more || err != nil {
				return more, err
			}
		}
		op.issued = true
	}
	if !op.notify {
		return false, nil
	}
	if op.target == w.e.rank {
		w.notes.push(Notification{Source: w.e.rank, Tag: op.tag, Offset: op.off, Len: op.n})
		op.notify = false
		return false, nil
	}
	// Field by field, not a composite literal: the compiler builds one
	// from a template with 16-byte moves over narrower stores, a
	// store-forwarding stall on every notification.
	var h header
	h.typ, h.win, h.off, h.a, h.tag = pktNotify, w.id, uint64(op.off), uint64(op.n), uint32(op.tag)
	ok, err := w.e.send(op.target, &h, nil)
	if err != nil || !ok {
		return !ok, err
	}
	op.notify = false
	return false, nil
}

// stepRemote moves op's data by the route's mechanism.
func (w *Window) stepRemote(op *Op) (bool, error) {
	switch w.route[op.target].Mechanism {
	case Knem:
		return w.copyKnem(op)
	case CMA:
		return w.copyCMA(op)
	}
	return w.sendAM(op)
}

// Flush waits until every operation this rank started toward target has
// completed: its data is in the target's memory (or, for a get, in the
// caller's buffer). A target found gone fails it with a *TargetError.
func (w *Window) Flush(target int) error {
	if target < 0 || target >= w.e.size {
		return errorf(ErrInvalidArg, "target rank %d in a job of %d", target, w.e.size)
	}
	if err := w.e.ep.WaitUntil(func() (bool, error) { return w.inflight[target] == 0, nil }); err != nil {
		return err
	}
	return w.e.alive(target)
}

// alive fails with a *TargetError when target is known gone, or when its
// process no longer exists: the copies of shared memory, CMA and knem
// never ask the target, so only this look tells.
func (e *engine) alive(target int) error {
	if target == e.rank {
		return nil
	}
	if err := e.dead[target]; err != nil {
		return targetGone(target, err)
	}
	if err := e.ep.PeerFailure(target); err != nil {
		return targetGone(target, err)
	}
	pid, err := e.ep.PeerPID(target)
	if err != nil {
		return err
	}
	if err := unix.Kill(pid, 0); err == unix.ESRCH {
		return targetGone(target, fmt.Errorf("no process %d: %w", pid, err))
	}
	return nil
}

// Fence completes every operation this rank started, then waits until
// every rank has done the same: after it, each rank's part holds what
// every put before the fence wrote. Collective.
func (w *Window) Fence() error {
	if w.freed {
		return ErrFreed
	}
	if err := w.e.ep.WaitUntil(func() (bool, error) { return w.total == 0, nil }); err != nil {
		return err
	}
	var none [1][collLen]byte
	return w.allgather(none[0][:0], nil)
}

// Free releases the window, collectively. It is refused with ErrInFlight,
// changing nothing, while operations this rank started on it have not
// completed: Wait for them (or Flush) and call it again.
func (w *Window) Free() error {
	if w.freed {
		return ErrFreed
	}
	if w.total > 0 {
		return fmt.Errorf("%w: %d operations not completed", ErrInFlight, w.total)
	}
	err := w.allgather(nil, nil)
	w.release()
	return err
}

// release gives back what the window holds, whether or not the ranks
// agreed on it.
func (w *Window) release() {
	w.freed = true
	w.e.wins[w.id] = nil
	if w.mem != nil {
		if w.rings != nil {
			w.e.ringWins = slices.DeleteFunc(w.e.ringWins, func(x *Window) bool { return x == w })
		}
		w.rings, w.ring = nil, ringReader{}
		_ = unix.Munmap(w.mem)
		w.mem = nil
	}
	w.detachAll()
	w.parts = nil
	if w.cookie != 0 {
		_ = w.e.knem.DestroyRegion(w.cookie)
		w.cookie = 0
	}
	w.local = nil
}

// allgather sends mine to every other rank as the window's next collective
// step and, with all != nil, collects every rank's into all (all[rank] =
// mine). A rank found gone fails it with a *TargetError.
func (w *Window) allgather(mine []byte, all [][collLen]byte) error {
	e := w.e
	phase := w.phase
	w.phase++
	h := header{typ: pktColl, win: w.id, a: phase}
	for dst := range e.size {
		if dst == e.rank {
			continue
		}
		if err := e.waitSend(dst, &h, mine); err != nil {
			return err
		}
	}
	if all != nil {
		copy(all[e.rank][:], mine)
	}
	need := e.size - 1
	e.expectAll(+1)
	defer e.expectAll(-1)
	return e.ep.WaitUntil(func() (bool, error) {
		for i := 0; i < len(e.coll); {
			c := &e.coll[i]
			if c.win != w.id || c.phase != phase {
				i++
				continue
			}
			if all != nil {
				all[c.src] = c.data
			}
			e.coll = append(e.coll[:i], e.coll[i+1:]...)
			need--
		}
		if need == 0 {
			return true, nil
		}
		for r, err := range e.dead {
			if err != nil {
				return false, targetGone(r, err)
			}
		}
		return false, nil
	})
}

// putUint64s encodes vals into a collective step's payload.
func putUint64s(vals ...uint64) []byte {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
	return b
}

func getUint64(b [collLen]byte, i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }

// pidNamespace is the inode of this process's PID namespace: a pid means
// the same process only to ranks in the same one.
func pidNamespace() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0
	}
	return st.Ino
}

var selfPID = os.Getpid()

// Endpoint is the endpoint the window was created over.
func (w *Window) Endpoint() *nemesis.Endpoint { return w.e.ep }

// expectAll has Poll watch every other rank's fastboxes (see
// nemesis.Endpoint.Expect), where the collective steps arrive.
func (e *engine) expectAll(delta int) {
	for r := range e.size {
		if r != e.rank {
			e.ep.Expect(r, delta)
		}
	}
}
