package lmt_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/peerfault"
	_ "github.com/knemesis/knemesis/pipe"
)

// counted records the engine callbacks of one rank.
type counted struct {
	completed, measured int
	moving              int64 // Stats.Moving seen by OnMeasured, in ns
}

func newCountedLoop(t *testing.T, backend string, noBuffered bool) (*loop, *[2]counted) {
	var c [2]counted
	cfg := lmt.WithKnobs(lmt.Config{Prefer: []string{backend}}, lmt.Knobs{NoBuffered: noBuffered})
	l := newLoopConfigEach(t, cfg, func(rank int, cfg *lmt.Config) {
		cfg.OnComplete = func(*lmt.Transfer) { c[rank].completed++ }
		cfg.OnMeasured = func(tr *lmt.Transfer) {
			c[rank].measured++
			c[rank].moving = int64(tr.Stats().Moving)
		}
	})
	return l, &c
}

// only delivers rank's control packets and progresses rank alone, as when
// its peer is busy elsewhere.
func (l *loop) only(t *testing.T, rank int) {
	t.Helper()
	for len(l.queue[rank]) > 0 {
		p := l.queue[rank][0]
		l.queue[rank] = l.queue[rank][1:]
		if err := l.engs[rank].HandleControl(1-rank, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.engs[rank].Progress(); err != nil {
		t.Fatal(err)
	}
}

// TestBufferedSendCompletesInChannel: a send on shm or pipe completes for
// its user once its bytes are in the channel and the receiver's CTS is in,
// before the receiver has read a byte; the receiver's DONE later brings
// the time the move took (OnMeasured), without completing it twice. Any
// send with NoBuffered waits for the DONE (vmsplice's, whose pipe
// references the sender's pages, always does: see attach's
// TestSendCompletesInChannel).
func TestBufferedSendCompletesInChannel(t *testing.T) {
	const n = 100<<10 + 7 // within the shm ring and the pipe
	for _, tc := range []struct {
		backend    string
		noBuffered bool
		early      bool // done before the receiver reads
	}{
		{"shm", false, true},
		{"pipe", false, true},
		{"shm", true, false},
		{"pipe", true, false},
	} {
		name := tc.backend
		if tc.noBuffered {
			name += "/NoBuffered"
		}
		t.Run(name, func(t *testing.T) {
			l, c := newCountedLoop(t, tc.backend, tc.noBuffered)
			msg := make([]byte, n)
			lmttest.Fill(msg, n)
			s := startSend(t, l, msg)
			snd := s.tr
			buf := make([]byte, n)
			rcv := recvInto(t, l, s, buf)
			for range 64 {
				l.only(t, 0)
			}
			if rcv.Moved() != 0 {
				t.Fatalf("receiver moved %d bytes without a Progress", rcv.Moved())
			}
			if snd.Done() != tc.early {
				t.Fatalf("sender done %v before the receiver read (moved %d of %d), want %v", snd.Done(), snd.Moved(), n, tc.early)
			}
			if tc.early {
				st := snd.Stats()
				if snd.Err() != nil || st.Bytes != n || st.Moving != 0 || c[0].completed != 1 || c[0].measured != 0 || l.engs[0].InChannel() != 1 {
					t.Fatalf("handed back: err %v, stats %+v, OnComplete %d, OnMeasured %d, InChannel %d; want nil, %d bytes, Moving 0, 1, 0, 1",
						snd.Err(), st, c[0].completed, c[0].measured, l.engs[0].InChannel(), n)
				}
				lmttest.Fill(msg, 0) // the buffer is the user's again
			}
			l.wait(t, snd, rcv)
			for i := 0; l.engs[0].Pending() > 0; i++ {
				if i > 1e6 {
					t.Fatal("sender never heard the receiver's DONE")
				}
				l.step(t)
			}
			if rcv.Err() != nil || snd.Err() != nil || lmttest.Check(buf, n) != nil {
				t.Fatalf("receiver %v, sender %v, payload: %v", rcv.Err(), snd.Err(), lmttest.Check(buf, n))
			}
			wantMeasured := 0
			if tc.early {
				wantMeasured = 1
			}
			if c[0].completed != 1 || c[0].measured != wantMeasured || c[1].completed != 1 || c[1].measured != 0 {
				t.Fatalf("callbacks %+v, want OnComplete once per side and OnMeasured %d times on the sender", *c, wantMeasured)
			}
			if tc.early && c[0].moving <= 0 {
				t.Fatalf("OnMeasured saw Moving %d, want the receiver's positive time", c[0].moving)
			}
			if l.engs[0].InChannel() != 0 {
				t.Fatalf("InChannel %d after the DONE", l.engs[0].InChannel())
			}
			if err := l.engs[0].Release(snd); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBufferedReceiverFails: a receiver that fails after the sender was
// handed back (here: it dies) leaves the sender's success alone: no second
// completion, no measurement, nothing left in the channel count.
func TestBufferedReceiverFails(t *testing.T) {
	l, c := newCountedLoop(t, "shm", false)
	s := startSend(t, l, bytes.Repeat([]byte{7}, 64<<10))
	snd := s.tr
	recvInto(t, l, s, make([]byte, len(s.msg)))
	for range 64 {
		l.only(t, 0)
	}
	if !snd.Done() || snd.Err() != nil {
		t.Fatalf("sender done %v (%v), want handed back", snd.Done(), snd.Err())
	}
	l.engs[0].PeerFailed(1, peerfault.Dead(1, 1, "", nil))
	if err := l.engs[0].Progress(); err != nil { // sweeps the completed
		t.Fatal(err)
	}
	if snd.Err() != nil || c[0].completed != 1 || c[0].measured != 0 || l.engs[0].InChannel() != 0 || l.engs[0].Pending() != 0 {
		t.Fatalf("after the receiver's death: err %v, OnComplete %d, OnMeasured %d, InChannel %d, Pending %d; want nil, 1, 0, 0, 0",
			snd.Err(), c[0].completed, c[0].measured, l.engs[0].InChannel(), l.engs[0].Pending())
	}
}

// TestDrainDeliversBufferedSends: a sender on shm or pipe completes with
// its bytes still in the channel and may then close and exit at once:
// Channel.Close (Engine.Drain) waits until the receiver, which matched the
// message but does not read until the sender has reported its send
// complete, has taken them. A receiver that exits without reading releases
// the sender's Close instead of holding it. Nothing here depends on how
// long anything takes: the receiver does not progress its engine (which
// would read) until the sender's report has arrived.
func TestDrainDeliversBufferedSends(t *testing.T) {
	const size = 200 << 10 // fits the shm ring (512 KiB) and the pipe
	for _, backend := range []string{"shm", "pipe"} {
		for _, reads := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/reads=%v", backend, reads), func(t *testing.T) {
				job := lmttest.NewJob(2)
				launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup}, func(p launch.Proc) error {
					ch, eng, err := lmttest.Open(p, backend, nil)
					if err != nil {
						return err
					}
					if p.Rank == 0 {
						return sendAndClose(ch, eng, backend, size)
					}
					defer ch.Close()
					r, err := ch.NextRTS(0)
					if err != nil {
						return err
					}
					got := make([]byte, size)
					tr, err := eng.StartRecv(0, r, [][]byte{got})
					if err != nil {
						return err
					}
					// The CTS is out. Deliver packets, never Progress,
					// until the sender says its send completed.
					if err := awaitMsg(ch, 0, "completed"); err != nil {
						return err
					}
					if tr.Moved() != 0 {
						return fmt.Errorf("receiver read %d bytes before the sender completed", tr.Moved())
					}
					if !reads {
						return nil // this process exits, its message unread
					}
					// Gone, the sender would leave the receiver to
					// tell its death from the end of the data.
					if err := eng.CheckPeer(0); err != nil {
						return fmt.Errorf("the sender left before its message was read: %w", err)
					}
					if err := ch.Wait(tr); err != nil {
						return fmt.Errorf("receiving after the sender closed: %w", err)
					}
					return lmttest.Check(got, 7)
				})
			})
		}
	}
}

// awaitMsg delivers control packets without progressing the engine until
// src's next small message arrives, and checks it is want.
func awaitMsg(ch *lmttest.Channel, src int, want string) error {
	for {
		if err := ch.Poll(); err != nil {
			return err
		}
		if m, ok := ch.TryMsg(src); ok {
			if string(m) != want {
				return fmt.Errorf("rank %d said %q, want %q", src, m, want)
			}
			return nil
		}
	}
}

// sendAndClose sends one message of size to rank 1, checks that it
// completed while its bytes were still in the channel, tells rank 1 so,
// and drains and closes: the drain must last until rank 1's DONE (reads)
// or its death (!reads) has ended the send.
func sendAndClose(ch *lmttest.Channel, eng *lmt.Engine, backend string, size int) error {
	rts := make([]byte, 4096)
	tr, n, err := eng.StartSend(1, [][]byte{lmttest.Message(size, 7)}, backend, rts)
	if err != nil {
		return err
	}
	if err := ch.SendRTS(1, rts[:n]); err != nil {
		return err
	}
	if err := ch.Wait(tr); err != nil {
		return err
	}
	if eng.InChannel() != 1 || eng.Pending() != 1 {
		return fmt.Errorf("%s send completed with %d sends in the channel and %d pending, want 1 and 1", backend, eng.InChannel(), eng.Pending())
	}
	if err := ch.SendMsg(1, []byte("completed")); err != nil {
		return err
	}
	if err := eng.Drain(ch.Poll); err != nil {
		return fmt.Errorf("Drain: %w", err)
	}
	if err := eng.Progress(); err != nil { // sweeps what completed
		return err
	}
	if eng.InChannel() != 0 || eng.Pending() != 0 || tr.Err() != nil {
		return fmt.Errorf("Drain returned with %d sends in the channel, %d pending, send error %v; want 0, 0, nil", eng.InChannel(), eng.Pending(), tr.Err())
	}
	return ch.Close()
}
