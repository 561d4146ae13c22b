package arena_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/internal/exitwait"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

const arenaSize = 8 << 20

// fill writes a pattern of seed into b without memcopy.Copy, so that copy
// counts see only the transfer.
func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(i*131 + seed*7 + i>>9)
	}
}

func sum(n, seed int) [32]byte {
	b := make([]byte, n)
	fill(b, seed)
	return sha256.Sum256(b)
}

// join joins with an arena and the LMT, whose preference names the arena
// backend: arena buffers then go by it, not by the endpoint's own single
// copy (nemesis.LMTArena).
func join(p launch.Proc) (*nemesis.Endpoint, *attach.LMT, error) {
	ep, err := nemesis.JoinProc(p, &nemesis.Options{ArenaSize: arenaSize})
	if err != nil {
		return nil, nil, err
	}
	l, err := attach.Attach(ep, attach.Options{Prefer: []string{lmt.Arena}})
	if err != nil {
		ep.Close()
		return nil, nil, err
	}
	return ep, l, nil
}

// medium are the sizes the arena serves, around the eager limit; the
// first fits a fastbox and stays eager, the second is one the aggregate
// strategy would pack into a cell were it not in the arena.
var medium = []int{1000, 3 << 10, 4 << 10, 8 << 10, 16 << 10, 32<<10 + 7, 64 << 10, 128 << 10, 256 << 10, 3<<20 + 5}

// TestArenaTransfers: a message sent from an arena buffer reaches an
// ordinary receive buffer intact (checked by SHA-256), by the arena
// backend with no system call on either side once it is longer than a
// fastbox; one that fits a fastbox stays eager. A list of arena buffers
// goes the same way, and a send forced onto the arena from other memory
// fails naming why.
func TestArenaTransfers(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprint("batched-aggregate=", batched), func(t *testing.T) { arenaTransfers(t, batched) })
	}
}

// arenaTransfers is TestArenaTransfers; batched sends each message in a
// Batch under the aggregate strategy, which must not pack an arena buffer
// into a cell.
func arenaTransfers(t *testing.T, batched bool) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, l, err := join(p)
		if err != nil {
			return err
		}
		defer ep.Close()
		defer l.Close()
		if batched {
			if err := ep.SetStrategy(nemesis.Aggregate); err != nil {
				return err
			}
		}
		for i, n := range medium {
			var err error
			if p.Rank == 0 {
				err = sendFromArena(ep, i, n, batched)
			} else {
				err = recvChecked(ep, i, n, n > ep.FastboxPayload())
			}
			if err != nil {
				return fmt.Errorf("%d bytes: %w", n, err)
			}
		}
		if p.Rank == 0 {
			if err := sendListFromArena(ep); err != nil {
				return err
			}
			var r nemesis.Request
			if err := l.Isend(&r, 1, 99, make([]byte, 100<<10), lmt.Arena); err != nil {
				return err
			}
			if err := ep.Wait(&r); err == nil || !strings.Contains(err.Error(), "not in this rank's shared arena") {
				return fmt.Errorf("send forced onto the arena from the heap: %v, want an error saying the buffer is not in the arena", err)
			}
			return ep.Send(1, 100, nil)
		}
		buf := make([]byte, 96<<10)
		var r nemesis.Request
		if err := ep.Irecv(&r, 0, len(medium), buf); err != nil {
			return err
		}
		if err := ep.Wait(&r); err != nil {
			return err
		}
		if st, _ := attach.Stats(&r); r.Status().Count != 96<<10 || sha256.Sum256(buf) != listSum() || st.Backend != lmt.Arena {
			return fmt.Errorf("list from the arena: %+v, stats %+v, checksum differs: %v", r.Status(), st, sha256.Sum256(buf) != listSum())
		}
		_, err = ep.Recv(0, 100, nil)
		return err
	})
}

func sendFromArena(ep *nemesis.Endpoint, seed, n int, batched bool) error {
	b, err := ep.Alloc(n)
	if err != nil {
		return err
	}
	fill(b, seed)
	var r nemesis.Request
	if batched {
		ep.Batch()
	}
	if err := ep.Isend(&r, 1, seed, b); err != nil {
		return err
	}
	if err := ep.Flush(); err != nil {
		return err
	}
	if err := ep.Wait(&r); err != nil {
		return err
	}
	st, viaLMT := attach.Stats(&r)
	if lmtWanted := n > ep.FastboxPayload(); viaLMT != lmtWanted || viaLMT && (st.Backend != lmt.Arena || st.Syscalls != 0) {
		return fmt.Errorf("sender: via LMT %v (want %v), stats %+v, want the arena backend and no system call", viaLMT, lmtWanted, st)
	}
	return ep.Free(b)
}

func recvChecked(ep *nemesis.Endpoint, seed, n int, viaArena bool) error {
	buf := make([]byte, n)
	var r nemesis.Request
	if err := ep.Irecv(&r, 0, seed, buf); err != nil {
		return err
	}
	if err := ep.Wait(&r); err != nil {
		return err
	}
	if r.Status().Count != n || sha256.Sum256(buf) != sum(n, seed) {
		return fmt.Errorf("receiver: %+v, or the SHA-256 of what arrived differs", r.Status())
	}
	st, viaLMT := attach.Stats(&r)
	if viaLMT != viaArena || viaLMT && (st.Backend != lmt.Arena || st.Syscalls != 0 || st.Bytes != int64(n)) {
		return fmt.Errorf("receiver: via LMT %v (want %v), stats %+v, want %d bytes by the arena backend and no system call", viaLMT, viaArena, st, n)
	}
	return nil
}

// listPieces split a 96 KiB message over three arena buffers.
var listPieces = []int{40 << 10, 0, 56 << 10}

func listSum() [32]byte {
	var all []byte
	for i, n := range listPieces {
		b := make([]byte, n)
		fill(b, 50+i)
		all = append(all, b...)
	}
	return sha256.Sum256(all)
}

func sendListFromArena(ep *nemesis.Endpoint) error {
	iov := make([][]byte, len(listPieces))
	for i, n := range listPieces {
		if n == 0 {
			continue
		}
		b, err := ep.Alloc(n)
		if err != nil {
			return err
		}
		fill(b, 50+i)
		iov[i] = b
	}
	if err := ep.Sendv(1, len(medium), iov); err != nil {
		return err
	}
	for _, b := range iov {
		if b != nil {
			if err := ep.Free(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestArenaOfDeadRank: rank 1 sends a 4 MiB message from its arena and
// dies at once, without closing anything (os.Exit: the kernel tears its
// mappings down as for a kill). Rank 0 waits until the process is gone,
// then receives: the copy out of the dead rank's region reads memory the
// job's segment keeps mapped, so the message arrives intact or fails with
// a PeerError naming rank 1, never a SIGBUS. The region still holds the
// bytes rank 1 wrote, rank 0's own arena still works, and once the job
// is over nothing of it is left in /dev/shm.
func TestArenaOfDeadRank(t *testing.T) {
	const n = 4 << 20
	job := launch.NewJobName()
	launchtest.RunOpts(t, 2, launchtest.Options{Job: job, ExitEarly: []int{1}}, func(p launch.Proc) error {
		ep, _, err := join(p)
		if err != nil {
			return err
		}
		if p.Rank == 1 {
			b, err := ep.Alloc(n)
			if err != nil {
				return err
			}
			fill(b, 3)
			var r nemesis.Request
			if err := ep.Isend(&r, 0, 0, b); err != nil {
				return err
			}
			os.Exit(0) // the RTS is out, the DONE never comes
		}
		if err := waitGone(ep, 1); err != nil {
			return err
		}
		buf := make([]byte, n)
		var r nemesis.Request
		if err := ep.Irecv(&r, 1, 0, buf); err != nil {
			return err
		}
		err = ep.Wait(&r)
		var pe *nemesis.PeerError
		switch {
		case err == nil:
			if sha256.Sum256(buf) != sum(n, 3) {
				return errors.New("the message read from the dead rank's arena differs")
			}
			fmt.Println("received intact from the dead rank's arena")
		case errors.As(err, &pe) && pe.Rank == 1:
			fmt.Printf("receive failed naming the dead rank: %v\n", err)
		default:
			return fmt.Errorf("receive from a dead rank's arena: %v, want the data or a PeerError naming rank 1", err)
		}
		if sha256.Sum256(ep.ArenaRegion(1)[:n]) != sum(n, 3) {
			return errors.New("the dead rank's region no longer holds what it wrote")
		}
		b, err := ep.Alloc(arenaSize)
		if err != nil {
			return fmt.Errorf("own arena after the peer died: %w", err)
		}
		if err := ep.Free(b); err != nil {
			return err
		}
		return ep.Close()
	})
	if left, _ := filepath.Glob("/dev/shm/*" + job + "*"); len(left) != 0 {
		t.Fatalf("left in /dev/shm after the job: %v", left)
	}
}

// waitGone returns once rank's process has exited.
func waitGone(ep *nemesis.Endpoint, rank int) error {
	pid, err := ep.PeerPID(rank)
	if err != nil {
		return err
	}
	if err := exitwait.Wait(pid); err != nil {
		return fmt.Errorf("rank %d: %w", rank, err)
	}
	return nil
}
