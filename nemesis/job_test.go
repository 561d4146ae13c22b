package nemesis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// barrier: everybody sends a token to rank 0, which answers everybody.
func barrier(ep *Endpoint) error {
	const tag = MaxTag
	if ep.Rank() != 0 {
		if err := ep.Send(0, tag, nil); err != nil {
			return err
		}
		_, err := ep.Recv(0, tag, nil)
		return err
	}
	for range ep.Size() - 1 {
		if _, err := ep.Recv(AnySource, tag, nil); err != nil {
			return err
		}
	}
	for r := 1; r < ep.Size(); r++ {
		if err := ep.Send(r, tag, nil); err != nil {
			return err
		}
	}
	return nil
}

// stamp fills msg with a header (source, index) and a pattern, so that
// the receiver can check origin, order and content.
func stamp(msg []byte, src, i int) {
	for j := range msg {
		msg[j] = byte(src*31 + i*7 + j)
	}
	if len(msg) >= 8 {
		binary.LittleEndian.PutUint32(msg, uint32(src))
		binary.LittleEndian.PutUint32(msg[4:], uint32(i))
	}
}

func msgSize(i, cell int) int {
	sizes := []int{0, 1, 8, 64, cell - 1, cell, cell + 1, 3*cell + 5, 1024}
	return sizes[i%len(sizes)]
}

// TestJobAllToAll: every rank sends every other rank a series of messages of
// mixed sizes (fastbox, one cell, several cells) and receives its own with
// AnySource; per source, messages arrive in order and intact. Jobs of 2, 4
// and 8 processes on this 2-core machine exercise the yielding waits; at
// 12, each rank has 11 fastbox sets attached, more than a wildcard receive
// scans, so it finds their messages by the bell.
func TestJobAllToAll(t *testing.T) {
	for _, procs := range []int{2, 4, 8, bellScanMax + 4} {
		t.Run(fmt.Sprint(procs), func(t *testing.T) {
			launchtest.Run(t, procs, func(p launch.Proc) error {
				ep, err := JoinProc(p, &Options{CellSize: 1024, Cells: 8, FastboxSize: 256})
				if err != nil {
					return err
				}
				defer ep.Close()
				return allToAll(ep, 60)
			})
		})
	}
}

func allToAll(ep *Endpoint, perPeer int) error {
	cell := ep.CellPayload()
	n := ep.Size()
	sends := make([]Request, 0, perPeer*n)
	bufs := make([][]byte, 0, perPeer*n)
	for i := 0; i < perPeer; i++ {
		for d := 0; d < n; d++ {
			if d == ep.Rank() {
				continue
			}
			msg := make([]byte, msgSize(i+d, cell))
			stamp(msg, ep.Rank(), i)
			bufs = append(bufs, msg)
			sends = append(sends, Request{})
			if err := ep.Isend(&sends[len(sends)-1], d, 3, msg); err != nil {
				return err
			}
		}
	}
	next := make([]int, n)
	rbuf := make([]byte, 4*cell)
	want := make([]byte, 4*cell)
	for range perPeer * (n - 1) {
		st, err := ep.Recv(AnySource, 3, rbuf)
		if err != nil {
			return err
		}
		i := next[st.Source]
		next[st.Source]++
		size := msgSize(i+ep.Rank(), cell)
		stamp(want[:size], st.Source, i)
		if st.Len != size || crc32.ChecksumIEEE(rbuf[:size]) != crc32.ChecksumIEEE(want[:size]) {
			return fmt.Errorf("message %d from rank %d: %d bytes, want %d, or content differs", i, st.Source, st.Len, size)
		}
	}
	for i := range sends {
		if err := ep.Wait(&sends[i]); err != nil {
			return err
		}
	}
	return barrier(ep)
}

// TestJobManyProducers: seven processes flood rank 0's receive queue with
// small messages through the queue alone (no fastboxes), with only 2 cells
// each, so that cells cycle through free queues under contention. Nothing
// may be lost or duplicated and each producer's order must hold.
func TestJobManyProducers(t *testing.T) {
	const perRank = 3000
	launchtest.Run(t, 8, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{CellSize: 256, Cells: 2, FastboxSize: -1})
		if err != nil {
			return err
		}
		defer ep.Close()
		var b [8]byte
		if ep.Rank() != 0 {
			for i := 0; i < perRank; i++ {
				stamp(b[:], ep.Rank(), i)
				if err := ep.Send(0, 1, b[:]); err != nil {
					return err
				}
			}
			return barrier(ep)
		}
		next := make([]int, ep.Size())
		for range perRank * (ep.Size() - 1) {
			st, err := ep.Recv(AnySource, 1, b[:])
			if err != nil {
				return err
			}
			src, i := int(binary.LittleEndian.Uint32(b[:])), int(binary.LittleEndian.Uint32(b[4:]))
			if src != st.Source || i != next[src] {
				return fmt.Errorf("from rank %d: element (%d, %d), want (%d, %d)", st.Source, src, i, st.Source, next[st.Source])
			}
			next[src]++
		}
		return barrier(ep)
	})
}

// TestJobDeadPeer: rank 1 dies without closing; rank 0's receive from it,
// wildcard receive and blocked send all fail naming rank 1 (a hang would
// stall the job's reports, and launchtest would stop it with its stacks).
func TestJobDeadPeer(t *testing.T) {
	launchtest.RunOpts(t, 2, launchtest.Options{Timeout: 60 * time.Second, ExitEarly: []int{1}}, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{CellSize: 256, Cells: 2, FastboxSize: -1})
		if err != nil {
			return err
		}
		if err := barrier(ep); err != nil {
			return err
		}
		if ep.Rank() == 1 {
			os.Exit(0) // a crash as far as nemesis can tell: no Close
		}
		defer ep.Close()
		check := func(what string, err error) error {
			var pe *PeerError
			if !errors.As(err, &pe) || pe.Rank != 1 || !errors.Is(err, ErrPeerDead) {
				return fmt.Errorf("%s: %v, want a PeerError for rank 1", what, err)
			}
			return nil
		}
		// More than its 2 cells and the fastbox-less queue hold: this send
		// blocks until the liveness check notices that rank 1 is gone.
		if err := check("Send(1)", ep.Send(1, 0, make([]byte, 10000))); err != nil {
			return err
		}
		_, err = ep.Recv(1, 0, nil)
		if err := check("Recv(1)", err); err != nil {
			return err
		}
		_, err = ep.Recv(AnySource, AnyTag, nil)
		if err := check("Recv(AnySource)", err); err != nil {
			return err
		}
		_, err = ep.Probe(1, AnyTag)
		return check("Probe(1)", err)
	})
}

// TestJobCellsReapedFromDeadPeer: rank 0 leaves both its cells in rank 1's
// receive queue, then rank 1 dies without receiving them. Rank 0's next
// send, to the live rank 2, needs a cell: it must get one back from the dead
// rank's queue instead of waiting for ever. (Without reaping this test
// times out.)
func TestJobCellsReapedFromDeadPeer(t *testing.T) {
	launchtest.RunOpts(t, 3, launchtest.Options{Timeout: 60 * time.Second, ExitEarly: []int{1}}, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{CellSize: 256, Cells: 2, FastboxSize: -1})
		if err != nil {
			return err
		}
		if err := barrier(ep); err != nil {
			return err
		}
		switch ep.Rank() {
		case 1:
			// Announce that it stops polling (Send returns without a
			// Poll when a cell is free), so rank 0's cells stay queued.
			if err := ep.Send(0, 9, nil); err != nil {
				return err
			}
			time.Sleep(200 * time.Millisecond)
			os.Exit(0)
		case 2:
			defer ep.Close()
			buf := make([]byte, 8)
			st, err := ep.Recv(0, 5, buf)
			if err != nil || string(buf[:st.Count]) != "survivor" {
				return fmt.Errorf("rank 2 got %q, %v", buf[:st.Count], err)
			}
			// If this rank is the reaper, the cell that carried
			// "survivor" came home mid-drain; the drain ends before
			// Recv returns, so this reply tells rank 0 it is over.
			return ep.Send(0, 6, nil)
		}
		defer ep.Close()
		if _, err := ep.Recv(1, 9, nil); err != nil {
			return err
		}
		for i := range 2 {
			if err := ep.Send(1, 0, []byte{byte(i)}); err != nil {
				return err
			}
		}
		if err := ep.Send(2, 5, []byte("survivor")); err != nil {
			return err
		}
		if _, err := ep.Recv(2, 6, nil); err != nil {
			return err
		}
		// Rank 0 or rank 2, whichever noticed first, drained the queue.
		if who := ep.seg.proc(1).reaper.Load(); who != 1 && who != 3 {
			return fmt.Errorf("rank 1's queue claimed by %d, want rank 0 or 2 (+1)", who)
		}
		if !ep.peers[1].recvQ.empty() {
			return fmt.Errorf("rank 1's receive queue still holds cells")
		}
		return nil
	})
}

// TestJobOrderAcrossPaths: two processes, real concurrency. Rank 0 sends
// messages of random sizes (fastbox, one cell, several cells) and tags,
// sometimes pausing; rank 1 receives them with random tag selections (or
// AnyTag) and checks that each receive got the earliest-sent message it
// matches. Both ranks derive the sequence from the same seed.
func TestJobOrderAcrossPaths(t *testing.T) {
	const total = 4000
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{CellSize: 512, Cells: 4, FastboxSize: 128})
		if err != nil {
			return err
		}
		defer ep.Close()
		fb, cell := ep.FastboxPayload(), ep.CellPayload()
		rng := rand.New(rand.NewPCG(7, 7))
		msgs := make([]sentMsg, total)
		for i := range msgs {
			size := rng.IntN(fb + 1)
			switch rng.IntN(3) {
			case 1:
				size = fb + 1 + rng.IntN(cell-fb)
			case 2:
				size = cell + 1 + rng.IntN(3*cell)
			}
			msgs[i] = sentMsg{idx: i, tag: rng.IntN(3), size: size}
		}
		if ep.Rank() == 0 {
			var reqs [8]Request
			bufs := make([][]byte, len(reqs))
			for i, m := range msgs {
				r := &reqs[i%len(reqs)]
				if r.state == statePending {
					if err := ep.Wait(r); err != nil {
						return err
					}
				}
				bufs[i%len(reqs)] = make([]byte, m.size)
				stamp(bufs[i%len(reqs)], m.tag, m.idx)
				if err := ep.Isend(r, 1, m.tag, bufs[i%len(reqs)]); err != nil {
					return err
				}
				if rng.IntN(50) == 0 {
					time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
				}
			}
			for i := range reqs {
				if reqs[i].state == statePending {
					if err := ep.Wait(&reqs[i]); err != nil {
						return err
					}
				}
			}
			return barrier(ep)
		}
		unrecv := msgs
		buf := make([]byte, 4*cell)
		for len(unrecv) > 0 {
			tag := AnyTag
			if rng.IntN(3) > 0 {
				tag = unrecv[rng.IntN(len(unrecv))].tag
			}
			var want sentMsg
			for i, m := range unrecv {
				if tag == AnyTag || m.tag == tag {
					want = m
					unrecv = append(unrecv[:i:i], unrecv[i+1:]...)
					break
				}
			}
			st, err := ep.Recv(0, tag, buf)
			if err != nil {
				return err
			}
			expect := make([]byte, want.size)
			stamp(expect, want.tag, want.idx)
			if st.Tag != want.tag || st.Len != want.size || !bytes.Equal(buf[:st.Count], expect) {
				return fmt.Errorf("receive for tag %d: got tag %d, %d bytes; want message %d (tag %d, %d bytes)", tag, st.Tag, st.Len, want.idx, want.tag, want.size)
			}
		}
		s := ep.Stats()
		if s.SeqFromFbox == 0 {
			return fmt.Errorf("no queue cell ever overtook a fastbox message: order across paths untested (%+v)", s)
		}
		return barrier(ep)
	})
}

// trafficLMT moves payload at every Progress, as a long transfer with a
// third rank would, whatever the caller waits for.
type trafficLMT struct{ chunkedLMT }

func (l *trafficLMT) Progress() error    { l.moved += 64 << 10; return nil }
func (l *trafficLMT) BytesMoved() uint64 { return l.moved }

// TestJobDeadPeerDuringTraffic: a Wait that keeps seeing payload move (so
// never yields) still checks liveness, and a receive from a rank that died
// fails naming it instead of spinning for ever.
func TestJobDeadPeerDuringTraffic(t *testing.T) {
	launchtest.RunOpts(t, 2, launchtest.Options{Timeout: 30 * time.Second, ExitEarly: []int{1}}, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{LivenessInterval: 20 * time.Millisecond})
		if err != nil {
			return err
		}
		if err := barrier(ep); err != nil {
			return err
		}
		if ep.Rank() == 1 {
			os.Exit(0) // a crash: no Close
		}
		defer ep.Close()
		l := &trafficLMT{chunkedLMT{ep: ep}}
		if err := ep.SetLMT(l, 100); err != nil {
			return err
		}
		// The barrier above may have yielded on a loaded machine.
		yields := ep.Stats().Yields
		_, err = ep.Recv(1, 0, nil)
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Rank != 1 || !errors.Is(err, ErrPeerDead) {
			return fmt.Errorf("Recv(1) with traffic flowing: %v, want a PeerError for rank 1", err)
		}
		if y := ep.Stats().Yields - yields; y != 0 {
			return fmt.Errorf("Wait yielded %d times while payload moved at every poll", y)
		}
		return nil
	})
}

// TestJobDeadRankFastboxDelivered: a rank sends a message through its
// fastbox and dies before the receiver has posted a receive for it or
// polled its fastboxes. When the receiver then finds it gone, the message
// is still delivered, and only receives for more fail.
func TestJobDeadRankFastboxDelivered(t *testing.T) {
	launchtest.RunOpts(t, 2, launchtest.Options{Timeout: 60 * time.Second, ExitEarly: []int{1}}, func(p launch.Proc) error {
		ep, err := JoinProc(p, nil)
		if err != nil {
			return err
		}
		if err := barrier(ep); err != nil {
			return err
		}
		if ep.Rank() == 1 {
			if err := ep.Send(0, 4, []byte("last word")); err != nil {
				return err
			}
			os.Exit(0)
		}
		defer ep.Close()
		if err := waitExited(ep.peers[1].pid); err != nil {
			return err
		}
		ep.peerFailed(1) // what a liveness check does, without a Poll first
		buf := make([]byte, 16)
		st, err := ep.Recv(1, 4, buf)
		if err != nil || string(buf[:st.Count]) != "last word" {
			return fmt.Errorf("the dead rank's last message: %q, %v", buf[:st.Count], err)
		}
		if ep.Stats().Unexpected != 1 {
			return fmt.Errorf("stats %+v: want the message taken as unexpected when the rank was found gone", ep.Stats())
		}
		_, err = ep.Recv(1, 4, buf)
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Rank != 1 {
			return fmt.Errorf("a further receive from the dead rank: %v, want a PeerError naming rank 1", err)
		}
		return nil
	})
}
