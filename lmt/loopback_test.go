package lmt_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// loop is a control channel between two engines of one process; it
// refuses every other packet while stingy is set, as a full queue would.
type loop struct {
	engs   [2]*lmt.Engine
	queue  [2][][]byte // by destination
	stingy bool
	tick   int
	sent   [2][][]byte // every packet accepted, by destination
}

type loopEnd struct {
	l    *loop
	rank int
}

func (c loopEnd) Send(dst int, pkt []byte) (bool, error) {
	c.l.tick++
	if c.l.stingy && c.l.tick%2 == 0 {
		return false, nil
	}
	p := append([]byte(nil), pkt...)
	c.l.queue[dst] = append(c.l.queue[dst], p)
	c.l.sent[dst] = append(c.l.sent[dst], p)
	return true, nil
}

func newLoop(t *testing.T, prefer ...string) *loop {
	return newLoopPIDs(t, [2]int{os.Getpid(), os.Getpid()}, prefer...)
}

// newLoopPIDs makes the loop's engine r take pid[r] for its peer's process.
func newLoopPIDs(t *testing.T, pid [2]int, prefer ...string) *loop {
	t.Helper()
	l := &loop{}
	job := launch.NewJobName()
	for r := range l.engs {
		e, err := lmt.New(lmt.Config{Rank: r, Size: 2, Job: job, Control: loopEnd{l, r}, Prefer: prefer,
			PeerPID: func(int) int { return pid[r] }})
		if err != nil {
			t.Fatal(err)
		}
		l.engs[r] = e
		t.Cleanup(func() { e.Close() })
	}
	return l
}

func (l *loop) step(t *testing.T) {
	for r, e := range l.engs {
		for len(l.queue[r]) > 0 {
			p := l.queue[r][0]
			l.queue[r] = l.queue[r][1:]
			if err := e.HandleControl(1-r, p); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.Progress(); err != nil {
			t.Fatal(err)
		}
	}
}

func (l *loop) wait(t *testing.T, ts ...*lmt.Transfer) {
	for i := 0; ; i++ {
		done := true
		for _, tr := range ts {
			done = done && tr.Done()
		}
		if done {
			return
		}
		if i > 1e7 {
			t.Fatal("transfers never completed")
		}
		l.step(t)
	}
}

// TestOutOfOrderMatch: the receiver matches the second message first. A
// stream channel carries one message at a time, so the receiver's CTS
// decides the order and each buffer gets its own message.
func TestOutOfOrderMatch(t *testing.T) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			l := newLoop(t, b)
			l.stingy = true
			sizes := []int{1<<20 + 1, 2<<20 + 3, 0}
			var sends, recvs []*lmt.Transfer
			var rts [][]byte
			for i, n := range sizes {
				m := make([]byte, n)
				lmttest.Fill(m, i*7)
				r := make([]byte, 4096)
				tr, k, err := l.engs[0].StartSend(1, [][]byte{m}, "", r)
				if err != nil {
					t.Fatal(err)
				}
				sends, rts = append(sends, tr), append(rts, r[:k])
			}
			bufs := make([][]byte, len(sizes))
			for _, i := range []int{1, 2, 0} {
				bufs[i] = make([]byte, sizes[i])
				tr, err := l.engs[1].StartRecv(0, rts[i], [][]byte{bufs[i]})
				if err != nil {
					t.Fatal(err)
				}
				recvs = append(recvs, tr)
			}
			l.wait(t, append(sends, recvs...)...)
			for i, n := range sizes {
				want := make([]byte, n)
				lmttest.Fill(want, i*7)
				if !bytes.Equal(bufs[i], want) {
					t.Errorf("message %d (%d bytes) arrived wrong", i, n)
				}
				if err := sends[i].Err(); err != nil {
					t.Errorf("send %d: %v", i, err)
				}
			}
			for _, tr := range recvs {
				if tr.Err() != nil || tr.Backend() != b {
					t.Errorf("receive: %v via %s", tr.Err(), tr.Backend())
				}
			}
		})
	}
}

// TestMalformed: packets that are not the engine's are rejected with an
// error, never a panic or a write.
func TestMalformed(t *testing.T) {
	l := newLoop(t, "shm")
	e := l.engs[1]
	bad := map[string][]byte{
		"empty":         nil,
		"short":         {1, 1, 0},
		"unknown type":  append([]byte{9}, make([]byte, 31)...),
		"payload past":  append([]byte{2, 1, 0, 0, 255, 0, 0, 0}, make([]byte, 24)...),
		"reserved byte": append([]byte{3, 1, 0, 7}, make([]byte, 28)...),
	}
	for name, p := range bad {
		if err := e.HandleControl(0, p); !errors.Is(err, lmt.ErrCorrupt) {
			t.Errorf("%s: HandleControl = %v, want an error", name, err)
		}
		if _, err := e.StartRecv(0, p, nil); err == nil {
			t.Errorf("%s: StartRecv accepted it", name)
		}
	}
	if _, _, err := l.engs[0].StartSend(0, nil, "", make([]byte, 64)); err == nil {
		t.Error("StartSend to itself accepted")
	}
	if _, _, err := l.engs[0].StartSend(1, nil, "", make([]byte, 8)); err == nil {
		t.Error("StartSend with an 8-byte RTS buffer accepted")
	}
	if _, _, err := l.engs[0].StartSend(1, nil, "knem", make([]byte, 64)); err == nil || !strings.Contains(err.Error(), "knem") {
		t.Errorf("StartSend via an unknown backend: %v", err)
	}
	// A CTS for a transfer id that does not exist is dropped.
	cts := append([]byte{2, 1, 0, 0, 0, 0, 0, 0}, make([]byte, 24)...)
	cts[16] = 77
	if err := e.HandleControl(0, cts); err != nil {
		t.Errorf("stale CTS: %v, want it ignored", err)
	}
}

// TestUnknownBackendInRTS: an RTS naming a backend this engine lacks, with
// no fallback allowed, fails both sides with an error naming it.
func TestUnknownBackendInRTS(t *testing.T) {
	l := newLoop(t, "cma")
	m := make([]byte, 100000)
	rts := make([]byte, 4096)
	send, n, err := l.engs[0].StartSend(1, [][]byte{m}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	rts[1] = 200 // a backend id nobody registered
	recv, err := l.engs[1].StartRecv(0, rts[:n], [][]byte{make([]byte, len(m))})
	if err != nil {
		t.Fatal(err)
	}
	l.wait(t, send, recv)
	if err := recv.Err(); err == nil || !strings.Contains(err.Error(), "backend id 200") {
		t.Errorf("receiver: %v, want an error naming backend id 200", err)
	}
	var re *lmt.RemoteError
	if err := send.Err(); !errors.As(err, &re) || re.Rank != 1 {
		t.Errorf("sender: %v, want a RemoteError from rank 1", err)
	}
}

// TestRelease: a released transfer is reused by the next StartSend or
// StartRecv on its engine, and carries the next message intact while the
// stingy channel keeps control packets waiting in the outbox; releasing one
// in flight, twice, or on another engine is refused.
func TestRelease(t *testing.T) {
	l := newLoop(t, "shm")
	l.stingy = true
	a, b := l.engs[0], l.engs[1]
	const n = 1<<20 + 7
	msg, buf := make([]byte, n), make([]byte, n)
	rts := make([]byte, 4096)
	var prevS, prevR *lmt.Transfer
	for i := range 4 {
		lmttest.Fill(msg, i)
		s, k, err := a.StartSend(1, [][]byte{msg}, "", rts)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Release(s); err == nil || !strings.Contains(err.Error(), "in flight") {
			t.Fatalf("Release of a transfer in flight: %v", err)
		}
		r, err := b.StartRecv(0, rts[:k], [][]byte{buf})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && (s != prevS || r != prevR) {
			t.Fatalf("message %d: released transfers not reused", i)
		}
		l.wait(t, s, r)
		want := make([]byte, n)
		lmttest.Fill(want, i)
		if s.Err() != nil || r.Err() != nil || !bytes.Equal(buf, want) || r.Stats().Bytes != n {
			t.Fatalf("message %d: %v, %v, stats %+v", i, s.Err(), r.Err(), r.Stats())
		}
		if err := b.Release(s); err == nil {
			t.Fatal("Release of another engine's transfer accepted")
		}
		for _, e := range []struct {
			e  *lmt.Engine
			tr *lmt.Transfer
		}{{a, s}, {b, r}} {
			if err := e.e.Release(e.tr); err != nil {
				t.Fatal(err)
			}
			if err := e.e.Release(e.tr); err == nil || !strings.Contains(err.Error(), "twice") {
				t.Fatalf("second Release: %v", err)
			}
		}
		for range 4 {
			l.step(t) // drain the outbox and the live lists
		}
		prevS, prevR = s, r
	}
}

// TestDoneFitsOneLine: the DONE that tells a sender how long the receiver
// took is a bare 32-byte header, which a fastbox holds in the line of its
// flag (one cache miss for the sender, not two), and the sender's
// Stats.Moving is the receiver's, carried in the header: its whole time,
// or for cma-split the time it took to copy its half.
func TestDoneFitsOneLine(t *testing.T) {
	for _, backend := range []string{"cma", "shm", "cma-split"} {
		t.Run(backend, func(t *testing.T) {
			l := newLoop(t, backend)
			s, rts, msg := l.sendOne(t, 100003, 1)
			r, buf := l.recvOne(t, rts, len(msg))
			l.wait(t, s, r)
			for !s.Done() || s.Stats().Moving == 0 {
				l.step(t) // a buffered sender completes before the DONE
			}
			if s.Err() != nil || r.Err() != nil || !bytes.Equal(buf, msg) {
				t.Fatalf("errors %v, %v; payload intact: %v", s.Err(), r.Err(), bytes.Equal(buf, msg))
			}
			var dones []int
			for _, p := range l.sent[0] {
				if lmt.PacketType(p) == "DONE" {
					dones = append(dones, len(p))
				}
			}
			if len(dones) != 1 || dones[0] != 32 {
				t.Fatalf("DONE packets to the sender: lengths %v, want one of 32 bytes", dones)
			}
			sm, rm := s.Stats().Moving, r.Stats().Moving
			if backend == "cma-split" && (sm <= 0 || sm > rm) || backend != "cma-split" && (sm != rm || sm <= 0) {
				t.Fatalf("sender's Moving %v, receiver's %v: want the same positive time (cma-split: at most the receiver's)", sm, rm)
			}
		})
	}
}

// packetTypes lists the types of the packets the loop delivered to rank.
func (l *loop) packetTypes(rank int) []string {
	var types []string
	for _, p := range l.sent[rank] {
		types = append(types, lmt.PacketType(p))
	}
	return types
}

// sendOne starts sending an n-byte message filled from seed, engine 0 to
// engine 1, and returns the transfer, its RTS and the message.
func (l *loop) sendOne(t *testing.T, n, seed int) (*lmt.Transfer, []byte, []byte) {
	t.Helper()
	msg, rts := make([]byte, n), make([]byte, 4096)
	lmttest.Fill(msg, seed)
	s, k, err := l.engs[0].StartSend(1, [][]byte{msg}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	return s, rts[:k], msg
}

// recvOne starts engine 1's receive of rts into a fresh n-byte buffer.
func (l *loop) recvOne(t *testing.T, rts []byte, n int) (*lmt.Transfer, []byte) {
	t.Helper()
	buf := make([]byte, n)
	r, err := l.engs[1].StartRecv(0, rts, [][]byte{buf})
	if err != nil {
		t.Fatal(err)
	}
	return r, buf
}

// TestSplitDoneEarly: each side of a cma-split transfer sends its DONE as
// soon as its own half is in, so the receiver's DONE is with the sender
// before the sender has copied a byte, and the sender completes on its own
// last chunk without waiting for another packet.
func TestSplitDoneEarly(t *testing.T) {
	l := newLoop(t, "cma-split")
	s, rts, msg := l.sendOne(t, 1<<20+5, 3)
	r, buf := l.recvOne(t, rts, len(msg))
	for i := 0; len(l.sent[0]) < 2; i++ {
		if i > 1000 {
			t.Fatalf("the receiver never sent its DONE; packets to the sender: %v", l.packetTypes(0))
		}
		if err := l.engs[1].Progress(); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.packetTypes(0); fmt.Sprint(got) != "[CTS DONE]" || s.Done() || r.Done() {
		t.Fatalf("receiver's half in: packets to the sender %v, sender done %v, receiver done %v; want [CTS DONE], neither done", got, s.Done(), r.Done())
	}
	for i := 0; !s.Done(); i++ {
		if i > 1000 {
			t.Fatal("the sender never completed")
		}
		l.step(t)
	}
	if got := l.packetTypes(0); fmt.Sprint(got) != "[CTS DONE]" || s.Err() != nil || s.Stats().Moving <= 0 {
		t.Fatalf("sender completed with %v, Moving %v, after packets %v; want nil, > 0, [CTS DONE]", s.Err(), s.Stats().Moving, got)
	}
	l.wait(t, r)
	if r.Err() != nil || !bytes.Equal(buf, msg) || fmt.Sprint(l.packetTypes(1)) != "[DONE]" {
		t.Fatalf("receiver: %v, payload intact %v, packets to it %v; want nil, true, [DONE]", r.Err(), bytes.Equal(buf, msg), l.packetTypes(1))
	}
}

// TestSplitDoneWaitsForCTS: a cma-split receiver with nothing to copy
// (its half of a 100-byte message is empty) is done with its half at once,
// while its CTS may still wait for room in the control channel. Its DONE
// must not take the CTS's place: it follows when the receiver completes.
func TestSplitDoneWaitsForCTS(t *testing.T) {
	l := newLoop(t, "cma-split")
	s, rts, msg := l.sendOne(t, 100, 5)
	l.stingy, l.tick = true, 1 // the next packet, the CTS, finds no room
	r, buf := l.recvOne(t, rts, len(msg))
	if len(l.sent[0]) != 0 || r.Done() {
		t.Fatalf("packets to the sender %v, receiver done %v; want none yet, not done", l.packetTypes(0), r.Done())
	}
	l.stingy = false
	l.wait(t, s, r)
	if s.Err() != nil || r.Err() != nil || !bytes.Equal(buf, msg) {
		t.Fatalf("errors %v, %v; payload intact %v", s.Err(), r.Err(), bytes.Equal(buf, msg))
	}
	if got := l.packetTypes(0); fmt.Sprint(got) != "[CTS DONE]" {
		t.Fatalf("packets to the sender %v, want [CTS DONE]", got)
	}
}

// TestDoneThenExit: a receiver may send its DONE and exit at once, so that
// the sender's watcher (the endpoint, the test harness) finds the process
// gone while the DONE still sits in the control channel. The watcher
// delivers what the peer sent before it reports the death: the engine then
// completes the send with the DONE and the late PeerFailed leaves it
// alone; without a DONE, PeerFailed fails the send with a *PeerError
// naming the peer and its pid. The engine does not watch on its own: its
// Progress calls never fail a send whose peer exited.
func TestDoneThenExit(t *testing.T) {
	for _, done := range []bool{true, false} {
		t.Run(fmt.Sprintf("done=%v", done), func(t *testing.T) {
			// The sender's peer process; the receiving engine reads
			// from this one.
			peer := exec.Command("sleep", "60")
			if err := peer.Start(); err != nil {
				t.Fatal(err)
			}
			defer peer.Wait()
			defer peer.Process.Kill()
			l := newLoopPIDs(t, [2]int{peer.Process.Pid, os.Getpid()}, "cma")
			msg := lmttest.Message(64<<10, 5)
			rts := make([]byte, 4096)
			send, k, err := l.engs[0].StartSend(1, [][]byte{msg}, "cma", rts)
			if err != nil {
				t.Fatal(err)
			}
			if done {
				buf := make([]byte, len(msg))
				recv, err := l.engs[1].StartRecv(0, rts[:k], [][]byte{buf})
				if err != nil {
					t.Fatal(err)
				}
				for !recv.Done() {
					if err := l.engs[1].Progress(); err != nil {
						t.Fatal(err)
					}
				}
				if err := recv.Err(); err != nil {
					t.Fatal(err)
				}
				if err := lmttest.Check(buf, 5); err != nil {
					t.Fatal(err)
				}
				if len(l.queue[0]) != 1 {
					t.Fatalf("%d packets for the sender, want its DONE", len(l.queue[0]))
				}
			}
			peer.Process.Kill()
			peer.Wait()
			for range 4096 {
				if err := l.engs[0].Progress(); err != nil {
					t.Fatal(err)
				}
			}
			if send.Done() {
				t.Fatalf("send ended (%v) with its peer's exit unreported, before the control channel was read", send.Err())
			}
			if done {
				if err := l.engs[0].HandleControl(1, l.queue[0][0]); err != nil {
					t.Fatal(err)
				}
			}
			l.engs[0].PeerFailed(1, errors.New("process exited"))
			if !send.Done() {
				t.Fatal("send still in flight after PeerFailed")
			}
			if done {
				if send.Err() != nil {
					t.Fatalf("send after its DONE and a late PeerFailed: %v, want nil", send.Err())
				}
				return
			}
			var pe *lmt.PeerError
			if !errors.As(send.Err(), &pe) || pe.Rank != 1 || pe.PID != peer.Process.Pid {
				t.Fatalf("send to an exited peer: %v, want a PeerError for rank 1, pid %d", send.Err(), peer.Process.Pid)
			}
		})
	}
}
