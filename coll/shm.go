package coll

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/internal/lineops"
	"github.com/knemesis/knemesis/internal/memcopy"
	"golang.org/x/sys/unix"
)

// Collectives in shared memory: a communicator whose ranks all share this
// node maps one file in which each rank owns a block that only it writes:
//
//	line 0  arrive:  epoch (8 bytes), then the call's header
//	line 1  release: epoch (8 bytes), then the call's header
//	in      shmSlot bytes: its contribution
//	out     shmSlot bytes: the result, when it is the hub
//
// A barrier, and a broadcast or reduction of at most shmSlot bytes, is one
// gather and one release on these lines, with no queue traffic: each rank
// writes its contribution into its slot and its epoch into its arrive
// line; the hub (root, or rank 0) waits for every arrive line to read the
// epoch, reads the slots (each copied once into its own memory, then
// folded in rank order), writes the result into its slot and the epoch
// into its release line; the others wait for that line and copy the
// result. Every operation has both phases, so that no rank writes its
// in slot again before the hub has read it (it waits for the release),
// and no hub its out slot before every rank has read the last result
// there (it waits for all to arrive); the two slots apart, since the hub
// changes from one operation to the next. A rank that waits wakes nobody by spinning: the
// writer of a line wakes the ranks that may doze on it (Endpoint.Wake).
//
// The lines are a peer's data: each epoch is loaded once and must read
// the epoch awaited or the one before; a header is copied once and
// checked against this rank's call. Anything else fails the collective
// with an error naming the rank and the field.
const (
	shmSlot  = 8 << 10
	shmLine  = 64
	shmBlock = 2*shmLine + 2*shmSlot
	// shmPrefix starts the name of each communicator's handover
	// directory, which lives in /dev/shm only while the ranks receive
	// the file (see setupShm).
	shmPrefix = "knemesis-coll-"
)

// ErrPeerData: a rank wrote something into the shared lines that no rank
// following the protocol writes; see *PeerDataError.
var ErrPeerData = errors.New("coll: impossible value in a peer's shared lines")

// PeerDataError names the rank and the field of its shared lines that
// held an impossible value.
type PeerDataError struct {
	Rank  int // job rank
	Field string
	Value uint64
	Want  string
}

func (e *PeerDataError) Error() string {
	return fmt.Sprintf("%v: job rank %d's %s reads %d, want %s", ErrPeerData, e.Rank, e.Field, e.Value, e.Want)
}

func (e *PeerDataError) Unwrap() error { return ErrPeerData }

// shmState is a communicator's shared file, once set up.
type shmState struct {
	state uint8 // shmUnset, shmOff, shmOn
	mem   []byte
	epoch uint64 // of the last operation built here
	done  uint64 // of the last operation finished here
}

const (
	shmUnset = iota
	shmSetting
	shmOff
	shmOn
)

// shmUsable reports whether c's collectives of bytes payload go through
// its shared file. Every rank reaches the same answer: it depends on the
// communicator and the size only, and the file's setup, at the
// communicator's first collective, is agreed by all.
func (c *Comm) shmUsable(bytes int) bool {
	return c.shm.state == shmOn && bytes <= shmSlot
}

// setupShm makes the file, by messages: rank 0 makes a sealed memfd
// (which no rank can shrink under the others, SIGBUS, or grow), serves
// it on a socket in a 0700 directory of /dev/shm under an unguessable
// name (internal/fdpass), and broadcasts that name; the others receive
// it there, checked sealed, of this user and of its size, and map it; all
// agree that every rank succeeded; rank 0 stops serving, which removes
// the name. Any failure leaves the communicator on the message path, on
// every rank.
func (c *Comm) setupShm() {
	c.shm.state = shmSetting
	if c.Size() < 2 {
		c.shm.state = shmOff
		return
	}
	for w := range c.members {
		if c.lib.ep.Remote(c.members[w]) {
			c.shm.state = shmOff
			return
		}
	}
	size := c.Size() * shmBlock
	var name [128]byte
	var path string
	var mem []byte
	var srv *fdpass.Server
	var err error
	if c.rank == 0 {
		path, srv, mem, err = createShm(size)
		copy(name[:], path)
	}
	if berr := Bcast(c, name[:], 0); berr != nil {
		err = errors.Join(err, berr)
	}
	if c.rank != 0 && err == nil {
		path = strings.TrimRight(string(name[:]), "\x00")
		if path == "" {
			err = errors.New("rank 0 made no file")
		} else {
			mem, err = openShm(path, size)
		}
	}
	failed := []int32{0}
	if err != nil {
		failed[0] = 1
	}
	aerr := Allreduce(c, failed, failed, BOr[int32]())
	if srv != nil {
		srv.Close()
	}
	if err != nil || aerr != nil || failed[0] != 0 {
		if mem != nil {
			unix.Munmap(mem)
		}
		c.shm.state = shmOff
		return
	}
	c.shm.mem, c.shm.state = mem, shmOn
}

// shmObject names the file in the errors of fdpass.
const shmObject = "coll shared-memory file"

// shmServed is the name rank 0 serves the file under.
const shmServed = "coll"

// testHookMapped, when set by a test, sees the handover directory and the
// descriptor of each file this process is about to map.
var testHookMapped func(path string, fd int)

func createShm(size int) (string, *fdpass.Server, []byte, error) {
	fdpass.Sweep("/dev/shm", shmPrefix, shmObject) // left by a rank 0 killed while serving
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", nil, nil, err
	}
	path := filepath.Join("/dev/shm", shmPrefix+hex.EncodeToString(rnd[:]))
	srv, err := fdpass.Listen(path, shmObject)
	if err != nil {
		return "", nil, nil, fmt.Errorf("coll: %w", err)
	}
	fd, err := fdpass.NewSealed("knemesis-coll", int64(size))
	if err != nil {
		srv.Close()
		return "", nil, nil, fmt.Errorf("coll: %w", err)
	}
	defer unix.Close(fd)
	if err := srv.Serve(shmServed, fd); err != nil {
		srv.Close()
		return "", nil, nil, fmt.Errorf("coll: %w", err)
	}
	mem, err := mapShm(path, fd, size)
	if err != nil {
		srv.Close()
		return "", nil, nil, err
	}
	return path, srv, mem, nil
}

func openShm(path string, size int) ([]byte, error) {
	if !strings.HasPrefix(path, filepath.Join("/dev/shm", shmPrefix)) || strings.Contains(path, "..") {
		return nil, fmt.Errorf("coll: rank 0 named %q, not a file of this package", path)
	}
	fd, _, err := fdpass.Fetch(path, shmServed, shmObject, fdpass.Want{Size: int64(size)})
	if err != nil {
		return nil, fmt.Errorf("coll: %w", err)
	}
	defer unix.Close(fd)
	return mapShm(path, fd, size)
}

func mapShm(path string, fd, size int) ([]byte, error) {
	if testHookMapped != nil {
		testHookMapped(path, fd)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("coll: mapping %d bytes: %w", size, err)
	}
	return mem, nil
}

func (c *Comm) freeShm() {
	if c.shm.mem != nil {
		unix.Munmap(c.shm.mem)
		c.shm.mem = nil
	}
	c.shm.state = shmOff
}

func (c *Comm) shmFlag(rank, line int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&c.shm.mem[rank*shmBlock+line*shmLine]))
}

func (c *Comm) shmHdr(rank, line int) []byte {
	off := rank*shmBlock + line*shmLine + 8
	return c.shm.mem[off : off+8]
}

// shmIn and shmOut are rank's slots: its contribution, and the result
// of the operations it is the hub of.
func (c *Comm) shmIn(rank int) []byte {
	off := rank*shmBlock + 2*shmLine
	return c.shm.mem[off : off+shmSlot]
}

func (c *Comm) shmOut(rank int) []byte {
	off := rank*shmBlock + 2*shmLine + shmSlot
	return c.shm.mem[off : off+shmSlot]
}

const (
	lineArrive  = 0
	lineRelease = 1
)

// shmOp builds q as one gather and one release on c's shared lines, around
// hub: contribute writes this rank's part (a rank other than the hub into
// its slot before it arrives, the hub once all have arrived);
// combine, run on the hub once every rank has arrived, gets each rank's
// slot (read once, through part) and leaves the result in res, which goes
// into the hub's slot; result, run on every rank once the result is out
// (the hub after its release, the others after they see it), gets the
// hub's slot.
func (q *Request) shmOp(hub, bytes int, contribute func(slot []byte), combine func(part func(i int) []byte, res []byte), result func(slot []byte)) {
	c := q.c
	q.viaShm = true
	c.shm.epoch++
	e := c.shm.epoch
	n, r := c.Size(), c.rank
	var h [8]byte
	h[0], h[1], h[2] = q.coll, q.el.kind, q.op
	binary.LittleEndian.PutUint32(h[4:], uint32(bytes))
	start := q.round()
	start.ready = func() (bool, error) { return c.shm.done == e-1, nil }
	start.after = func() error {
		if contribute != nil && r != hub {
			contribute(c.shmIn(r)[:bytes])
		}
		copy(c.shmHdr(r, lineArrive), h[:])
		lineops.StoreRelease64(c.shmFlag(r, lineArrive), e)
		if r != hub {
			c.lib.ep.Wake(c.members[hub])
		}
		return nil
	}
	if r == hub {
		gather := q.round()
		seen := 1 // ranks seen arrived, in order from hub+1
		gather.ready = func() (bool, error) {
			for ; seen < n; seen++ {
				i := (hub + seen) % n
				if ok, err := q.shmAwait(i, lineArrive, e, h); !ok || err != nil {
					return false, err
				}
			}
			return true, nil
		}
		gather.after = func() error {
			// Every rank has arrived: none reads the last result in
			// the hub's out slot any more.
			slot := c.shmOut(r)[:bytes]
			if combine == nil {
				if contribute != nil {
					contribute(slot)
				}
			} else {
				own, buf, res := scratch(bytes), scratch(bytes), scratch(bytes)
				if contribute != nil {
					contribute(own)
				}
				part := func(i int) []byte {
					if i == r {
						return own
					}
					memcopy.Copy(buf, c.shmIn(i)[:bytes])
					return buf
				}
				combine(part, res)
				memcopy.Copy(slot, res)
			}
			copy(c.shmHdr(r, lineRelease), h[:])
			lineops.StoreRelease64(c.shmFlag(r, lineRelease), e)
			for i, w := range c.members {
				if i != r {
					c.lib.ep.Wake(w)
				}
			}
			if result != nil {
				result(slot)
			}
			c.shm.done = e
			return nil
		}
		return
	}
	release := q.round()
	release.ready = func() (bool, error) { return q.shmAwait(hub, lineRelease, e, h) }
	release.after = func() error {
		if result != nil {
			result(c.shmOut(hub)[:bytes])
		}
		c.shm.done = e
		return nil
	}
}

// shmAwait reads rank i's line once: false while it holds the epoch
// before e, true once it holds e and a header equal to h; anything else is
// an error naming the rank and the field.
func (q *Request) shmAwait(i, line int, e uint64, h [8]byte) (bool, error) {
	c := q.c
	field := [...]string{"arrive epoch", "release epoch"}[line]
	// Every rank arrives at every operation, so its arrive line holds
	// the epoch before e until it arrives at e; a release line holds
	// the epoch of the last operation its rank was the hub of.
	v := c.shmFlag(i, line).Load()
	switch {
	case v == e:
	case v == e-1 || line == lineRelease && v < e:
		return false, nil
	default:
		want := fmt.Sprintf("%d or %d", e-1, e)
		if line == lineRelease {
			want = fmt.Sprintf("at most %d", e)
		}
		err := &PeerDataError{Rank: c.members[i], Field: field, Value: v, Want: want}
		q.fail(i, err)
		return false, err
	}
	var got [8]byte
	copy(got[:], c.shmHdr(i, line))
	if got == h {
		return true, nil
	}
	var err error
	switch {
	case got[0] != h[0]:
		err = &MismatchError{"operation", collName(got[0]), collName(h[0])}
	case got[1] != h[1]:
		err = &MismatchError{"element type", kindName(got[1]), kindName(h[1])}
	case got[2] != h[2]:
		err = &MismatchError{"reduction", opName(got[2]), opName(h[2])}
	default:
		err = &MismatchError{"payload bytes", strconv.Itoa(int(binary.LittleEndian.Uint32(got[4:]))), strconv.Itoa(int(binary.LittleEndian.Uint32(h[4:])))}
	}
	q.fail(i, err)
	return false, err
}

// shmReduce is a reduction on the shared lines: every rank's send into
// its slot, the rank-order fold at hub, the result into recv where
// wanted (every rank for Allreduce, hub alone for Reduce).
func (q *Request) shmReduce(send, recv []byte, f fold, hub int, want bool) {
	n := q.c.Size()
	var result func(slot []byte)
	if want {
		result = func(slot []byte) { memcopy.Copy(recv, slot) }
	}
	q.shmOp(hub, len(send), func(slot []byte) { memcopy.Copy(slot, send) },
		func(part func(int) []byte, res []byte) { foldAll(res, n, part, f) }, result)
}
