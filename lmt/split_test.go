package lmt

import (
	"bytes"
	"os"
	"testing"

	"github.com/knemesis/knemesis/nemesis/launch"
)

func TestSplitAt(t *testing.T) {
	for _, c := range []struct {
		length int64
		share  uint8
		want   int64
	}{
		{1 << 20, 0, 512 << 10}, // a peer that does not balance: half
		{1 << 20, splitHalf, 512 << 10},
		{1 << 20, 192, 768 << 10},
		{1<<20 + 4095, 64, 256 << 10},
		{8191, splitHalf, 0}, // below two pages the sender copies it all
		{0, 200, 0},
	} {
		if got := splitAt(c.length, c.share); got != c.want {
			t.Errorf("splitAt(%d, %d) = %d, want %d", c.length, c.share, got, c.want)
		}
	}
}

func TestSplitModel(t *testing.T) {
	const mib = 1 << 20
	var m splitModel
	if s := m.share(mib); s != splitHalf {
		t.Fatalf("untrained share %d, want %d", s, splitHalf)
	}
	// Halves too short to time copy speed teach nothing.
	m.learn(8<<10, 1000, 0, 8<<10, 1000)
	if m.samples != 0 {
		t.Fatalf("learned from 8 KiB halves: %+v", m)
	}
	// The receiver copies at half the sender's speed, no lag: it should
	// take a third.
	m.learn(512<<10, 2*512<<10, 0, 512<<10, 512<<10)
	if s := m.share(mib); s != 85 {
		t.Errorf("receiver twice as slow: share %d/256, want 85 (a third)", s)
	}
	// Equal speeds (1 ns/B), and the sender starts 64 Ki ns late: the
	// receiver takes 32 KiB more than half of 1 MiB.
	m = splitModel{}
	m.learn(512<<10, 512<<10, 64<<10, 512<<10, 512<<10)
	if s := m.share(mib); s != 136 {
		t.Errorf("sender 64 µs late: share %d/256, want 136", s)
	}
	// Neither side is ever left with less than an eighth.
	m = splitModel{}
	m.learn(512<<10, 100*512<<10, 0, 512<<10, 512<<10)
	if s := m.share(mib); s != splitMinShare {
		t.Errorf("receiver 100× slower: share %d, want the floor %d", s, splitMinShare)
	}
	m = splitModel{}
	m.learn(512<<10, 512<<10, 0, 512<<10, 100*512<<10)
	if s := m.share(mib); s != splitMaxShare {
		t.Errorf("sender 100× slower: share %d, want the ceiling %d", s, splitMaxShare)
	}
	// One descheduled copy moves the estimate by at most (4-1)/8.
	m = splitModel{}
	m.learn(512<<10, 512<<10, 0, 512<<10, 512<<10)
	m.learn(512<<10, 1000*512<<10, 0, 512<<10, 512<<10)
	if m.recv != 1+3.0/8 {
		t.Errorf("after one outlier the receiver's cost is %v ns/B, want 1.375", m.recv)
	}
}

// pair is two engines of this process joined by in-memory control queues.
type pair struct {
	engs  [2]*Engine
	queue [2][][]byte
}

type pairEnd struct {
	p    *pair
	rank int
}

func (c pairEnd) Send(dst int, pkt []byte) (bool, error) {
	c.p.queue[dst] = append(c.p.queue[dst], append([]byte(nil), pkt...))
	return true, nil
}

func newPair(t *testing.T, prefer string) *pair {
	p := &pair{}
	job := launch.NewJobName()
	for r := range p.engs {
		e, err := New(Config{Rank: r, Size: 2, Job: job, Control: pairEnd{p, r}, Prefer: []string{prefer},
			PeerPID: func(int) int { return os.Getpid() }})
		if err != nil {
			t.Fatal(err)
		}
		p.engs[r] = e
		t.Cleanup(func() { e.Close() })
	}
	return p
}

func (p *pair) run(t *testing.T, ts ...*Transfer) {
	for i := 0; i < 1e6; i++ {
		done := true
		for _, tr := range ts {
			done = done && tr.Done()
		}
		if done {
			return
		}
		for r, e := range p.engs {
			for len(p.queue[r]) > 0 {
				pkt := p.queue[r][0]
				p.queue[r] = p.queue[r][1:]
				if err := e.HandleControl(1-r, pkt); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Progress(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("transfers never completed")
}

// TestSplitPointTravels: the receiver's split point reaches the sender in
// the CTS, each side copies exactly its part, and the message arrives whole.
func TestSplitPointTravels(t *testing.T) {
	p := newPair(t, "cma-split")
	// A receiver that measured a sender three times as slow per byte
	// keeps three quarters.
	p.engs[1].peers[0].split = splitModel{recv: 1, send: 3, samples: 1}
	const size = 1<<20 + 12345
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i*7 + i>>11)
	}
	rts := make([]byte, 4096)
	st, n, err := p.engs[0].StartSend(1, [][]byte{msg}, "", rts)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, size)
	rt, err := p.engs[1].StartRecv(0, rts[:n], [][]byte{buf})
	if err != nil {
		t.Fatal(err)
	}
	p.run(t, st, rt)
	if st.Err() != nil || rt.Err() != nil {
		t.Fatalf("sender %v, receiver %v", st.Err(), rt.Err())
	}
	if !bytes.Equal(buf, msg) {
		t.Fatal("the message arrived corrupted")
	}
	want := splitAt(size, 192)
	if s, r := st.Stats().Split, rt.Stats().Split; s != want || r != want {
		t.Errorf("split at %d (sender) and %d (receiver), want %d for both", s, r, want)
	}
	// Each side's chunks cover its part only.
	chunks := func(n int64) int { return int((n + DefaultChunk - 1) / DefaultChunk) }
	if c := rt.Stats().Chunks; c != chunks(want) {
		t.Errorf("receiver copied in %d chunks, want %d for [0, %d)", c, chunks(want), want)
	}
	if c := st.Stats().Chunks; c != chunks(size-want) {
		t.Errorf("sender copied in %d chunks, want %d for [%d, %d)", c, chunks(size-want), want, size)
	}
	// The transfer taught the receiver both sides' speeds.
	if m := p.engs[1].peers[0].split; m.samples != 2 || m.recv <= 0 || m.send <= 0 {
		t.Errorf("model after one transfer: %+v, want a second sample with positive costs", m)
	}
}
