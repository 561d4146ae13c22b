package coll

import (
	"cmp"
	"fmt"
	"math/bits"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/knemesis/knemesis/internal/fastclock"
	"github.com/knemesis/knemesis/nemesis"
	"golang.org/x/sys/unix"
)

// Comm is a communicator: an ordered group of the job's ranks with its own
// matching context. Its ranks are numbered 0..Size()-1 in the order the
// call that made it gave them; its collectives' messages carry its
// context id in their tags, so they never match another communicator's,
// nor any receive of the application's (see tag.go). Ranks on this node
// and on others (through the endpoint's network module) take part alike.
//
// Like its endpoint, a Comm belongs to one goroutine. Every rank of a
// communicator must call its collectives in the same order (nonblocking
// ones may then be completed in any order).
type Comm struct {
	lib     *library
	cid     int
	rank    int
	members []int // job rank of each rank
	seq     uint32
	pending int
	broken  error
	freed   bool
	shm     shmState // the shared lines of small collectives (shm.go)
}

// library is what every communicator of one endpoint shares: the context
// ids in use on this rank and the collectives outstanding.
type library struct {
	ep     *nemesis.Endpoint
	used   [cidWords]uint64
	active []*Request
	world  *Comm
	tick   uint32
	// watched is when progress last looked for failures (fastclock).
	watched int64
}

var (
	libsMu sync.Mutex
	libs   = map[*nemesis.Endpoint]*library{}
)

// World returns the communicator of every rank of ep's job, ranked as the
// job ranks them (context id 0). Every call with the same endpoint
// returns the same communicator. h is what the application holds: a
// *nemesis.Endpoint, or the *knemesis.Endpoint that knemesis.Join
// returns. The communicator lives as long as the endpoint; communicators
// made from it are freed with Free.
func World(h nemesis.Holder) *Comm {
	ep := nemesis.EndpointOf(h)
	libsMu.Lock()
	defer libsMu.Unlock()
	if l := libs[ep]; l != nil {
		return l.world
	}
	l := &library{ep: ep}
	members := make([]int, ep.Size())
	for i := range members {
		members[i] = i
	}
	l.used[0] |= 1
	l.world = &Comm{lib: l, cid: 0, rank: ep.Rank(), members: members}
	libs[ep] = l
	return l.world
}

// Rank is this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int { return len(c.members) }

// JobRank is the job (endpoint) rank of the communicator's rank r.
func (c *Comm) JobRank(r int) int { return c.members[r] }

// ContextID is the communicator's context id, as errors name it.
func (c *Comm) ContextID() int { return c.cid }

// Endpoint is the endpoint the communicator's messages go through.
func (c *Comm) Endpoint() *nemesis.Endpoint { return c.lib.ep }

// rankOf is the communicator rank of job rank w, or -1.
func (c *Comm) rankOf(w int) int {
	return slices.Index(c.members, w)
}

// Undefined is the color of a rank that wants no communicator from Split.
const Undefined = -1

// Split is MPI_Comm_split: a collective over c that puts the ranks that
// pass the same color (≥ 0) in one new communicator, ranked by key, then
// by their rank in c. A rank that passes Undefined gets nil.
func (c *Comm) Split(color, key int) (*Comm, error) {
	if color < 0 && color != Undefined {
		return nil, argErr("Split color %d: want ≥ 0 or Undefined", color)
	}
	n := c.Size()
	mine := []int64{int64(color), int64(key)}
	all := make([]int64, 2*n)
	if err := Allgather(c, mine, all); err != nil {
		return nil, err
	}
	cid, err := c.agreeCID()
	if err != nil {
		return nil, err
	}
	if color == Undefined {
		return nil, nil
	}
	type member struct{ key, rank int }
	var group []member
	for i := range n {
		if all[2*i] == int64(color) {
			group = append(group, member{int(all[2*i+1]), i})
		}
	}
	slices.SortFunc(group, func(a, b member) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.rank, b.rank))
	})
	nc := &Comm{lib: c.lib, cid: cid, members: make([]int, len(group))}
	for i, m := range group {
		nc.members[i] = c.members[m.rank]
		if m.rank == c.rank {
			nc.rank = i
		}
	}
	c.lib.used[cid/64] |= 1 << (cid % 64)
	return nc, nil
}

// SplitShared is MPI_Comm_split_type with MPI_COMM_TYPE_SHARED: one
// communicator per node, of the ranks of c that share this one's memory
// (those the endpoint reaches without its network module), ranked by key,
// then by their rank in c.
func (c *Comm) SplitShared(key int) (*Comm, error) {
	ep := c.lib.ep
	color := ep.Rank()
	for w := range ep.Size() {
		if !ep.Remote(w) {
			color = w // the lowest job rank of this node names it
			break
		}
	}
	return c.Split(color, key)
}

// Dup is MPI_Comm_dup: the same ranks, in the same order, with a context
// of their own.
func (c *Comm) Dup() (*Comm, error) {
	return c.Split(0, c.rank)
}

// agreeCID is the lowest context id free on every rank of c: an
// allreduce of the free sets. It is the same on every rank of c, whatever
// the colors of a Split: communicators that share a rank never share an
// id, disjoint ones may.
func (c *Comm) agreeCID() (int, error) {
	free := make([]uint64, cidWords)
	for i := range free {
		free[i] = ^c.lib.used[i]
	}
	if err := Allreduce(c, free, free, BAnd[uint64]()); err != nil {
		return 0, err
	}
	for i, w := range free {
		if w != 0 {
			return i*64 + bits.TrailingZeros64(w), nil
		}
	}
	return 0, fmt.Errorf("%w: all %d in use", ErrNoContext, MaxComms)
}

// Free releases the communicator's context id on this rank; every rank of
// it should free it once it is done with it (as MPI_Comm_free: the id is
// reused only once freed on every rank that a new communicator spans).
// Collectives still outstanding on it, or the world communicator, refuse.
func (c *Comm) Free() error {
	switch {
	case c.freed:
		return fmt.Errorf("%w: context %d already freed", ErrFreed, c.cid)
	case c == c.lib.world:
		return argErr("the world communicator is freed with its endpoint")
	case c.pending > 0:
		return argErr("communicator %d has %d collectives outstanding: wait for them first", c.cid, c.pending)
	}
	c.freed = true
	c.freeShm()
	c.lib.used[c.cid/64] &^= 1 << (c.cid % 64)
	return nil
}

// Abort is MPI_Abort: it ends every process of the communicator that it
// can, this one last with status code. The other ranks on this node are
// killed (SIGKILL, through a pidfd, so that a recycled PID is never hit);
// a rank on another node is left to its launcher, which sees this one
// fail, and to the failure of its transfers with this rank.
func (c *Comm) Abort(code int) {
	ep := c.lib.ep
	for _, w := range c.members {
		if w == ep.Rank() || ep.Remote(w) {
			continue
		}
		pid, err := ep.PeerPID(w)
		if err != nil {
			continue
		}
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			unix.Close(fd)
		}
	}
	os.Exit(code)
}

// start numbers a new collective on c, or says why c cannot run one.
func (c *Comm) start(coll uint8, el elem, op uint8) (*Request, error) {
	switch {
	case c.freed:
		return nil, fmt.Errorf("%w: context %d", ErrFreed, c.cid)
	case c.broken != nil:
		return nil, fmt.Errorf("%w: %w", ErrBroken, c.broken)
	case c.pending >= maxPending:
		return nil, fmt.Errorf("%w: %d", ErrTooManyPending, c.pending)
	}
	if c.shm.state == shmUnset {
		// The first collective on c, whichever it is, on every rank.
		c.setupShm()
	}
	q := &Request{c: c, seq: c.seq, coll: coll, el: el, op: op}
	c.seq++
	c.pending++
	return q, nil
}

// run puts q among the outstanding collectives and starts it.
func (q *Request) run() (*Request, error) {
	l := q.c.lib
	l.active = append(l.active, q)
	q.step()
	if q.done && q.err != nil {
		return nil, q.err
	}
	return q, nil
}

// refuse fails q at once for a bad argument of this rank's, telling the
// others, so that none of them waits for this rank's part.
func (q *Request) refuse(err error) (*Request, error) {
	q.c.lib.active = append(q.c.lib.active, q)
	q.fail(-1, err)
	return nil, q.err
}

// progress advances every outstanding collective of the endpoint, in the
// order they started, and now and then looks for what would make one wait
// for ever.
func (l *library) progress() {
	l.tick++
	watch := l.tick%16 == 0
	if now := fastclock.Nanotime(); now-l.watched > int64(time.Millisecond) {
		// A blocked call dozes between ticks once idle: count time too,
		// or a failure would wait for 16 naps.
		watch, l.watched = true, now
	}
	for i := 0; i < len(l.active); {
		q := l.active[i]
		q.step()
		if !q.done && watch {
			q.watch()
		}
		if i < len(l.active) && l.active[i] == q {
			i++
		}
	}
}

func (l *library) drop(q *Request) {
	if i := slices.Index(l.active, q); i >= 0 {
		l.active = slices.Delete(l.active, i, i+1)
	}
}
