package lmt_test

import (
	"os"
	"testing"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// ringControl is a control channel between two engines of one process that
// allocates nothing: a packet is copied into a fixed slot, as a fastbox
// would take it.
type ringControl struct {
	slots [2][8][512]byte // by destination
	lens  [2][8]int
	head  [2]int
	tail  [2]int
}

type ringEnd struct{ r *ringControl }

func (c ringEnd) Send(dst int, pkt []byte) (bool, error) {
	r := c.r
	if r.tail[dst]-r.head[dst] == len(r.slots[dst]) {
		return false, nil
	}
	i := r.tail[dst] % len(r.slots[dst])
	r.lens[dst][i] = copy(r.slots[dst][i][:], pkt)
	r.tail[dst]++
	return true, nil
}

// deliver hands every queued packet to its engine, then lets both progress.
func (r *ringControl) deliver(b testing.TB, engs *[2]*lmt.Engine) {
	for dst, e := range engs {
		for r.head[dst] < r.tail[dst] {
			i := r.head[dst] % len(r.slots[dst])
			r.head[dst]++
			if err := e.HandleControl(1-dst, r.slots[dst][i][:r.lens[dst][i]]); err != nil {
				b.Fatal(err)
			}
		}
		if err := e.Progress(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProtocol measures what the engine itself costs per message, on
// both sides together: the RTS, CTS and DONE of an empty message, with a
// control channel that costs nothing. The copy, the queue crossings and
// the waiting are left out, so that a change to the engine's hot path
// shows here in nanoseconds, which a two-process benchmark would bury in
// its noise. A message must allocate nothing.
func BenchmarkProtocol(b *testing.B) {
	for _, backend := range []string{"cma", "cma-write", "cma-split", "multirail", "shm"} {
		b.Run(backend, func(b *testing.B) {
			ctl := &ringControl{}
			var engs [2]*lmt.Engine
			job := launch.NewJobName()
			// Both engines live in this process. The pid is read once,
			// as a job's endpoint reads its peers' from the segment: a
			// getpid(2) per message here is a system call no job makes.
			pid := os.Getpid()
			for r := range engs {
				e, err := lmt.New(lmt.Config{Rank: r, Size: 2, Job: job, Control: ringEnd{ctl},
					Prefer: []string{backend}, PeerPID: func(int) int { return pid }})
				if err != nil {
					b.Fatal(err)
				}
				engs[r] = e
				defer e.Close()
			}
			send, recv := [][]byte{{}}, [][]byte{{}}
			rts := make([]byte, 512)
			b.ReportAllocs()
			for b.Loop() {
				s, n, err := engs[0].StartSend(1, send, "", rts)
				if err != nil {
					b.Fatal(err)
				}
				r, err := engs[1].StartRecv(0, rts[:n], recv)
				if err != nil {
					b.Fatal(err)
				}
				for !s.Done() || !r.Done() {
					ctl.deliver(b, &engs)
				}
				if s.Err() != nil || r.Err() != nil {
					b.Fatalf("send: %v, receive: %v", s.Err(), r.Err())
				}
				if st := r.Stats(); st.Backend != backend {
					b.Fatalf("message went via %s, want %s", st.Backend, backend)
				}
				if err := engs[0].Release(s); err != nil {
					b.Fatal(err)
				}
				if err := engs[1].Release(r); err != nil {
					b.Fatal(err)
				}
				ctl.deliver(b, &engs) // a late DONE for a handed-back send
			}
		})
	}
}
