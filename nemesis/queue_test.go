package nemesis

import (
	"encoding/binary"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// newTestSegment builds a segment in a test directory, without joining it.
func newTestSegment(t testing.TB, l layout) *segment {
	t.Helper()
	s, err := createSegment(t.TempDir(), "queue-test", l, testKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.unlink(); s.unmap() })
	return s
}

// TestQueueContention runs the Nemesis cycle with goroutines standing for
// processes: each producer takes cells from its own free queue (where only
// it dequeues), numbers them and enqueues them on one receive queue; the
// single consumer checks per-producer FIFO order and returns each cell to
// its owner's free queue. Both queue roles are therefore contended: many
// enqueuers on the receive queue, enqueuer and dequeuer on every free queue.
func TestQueueContention(t *testing.T) {
	const producers, perProducer = 7, 20000
	s := newTestSegment(t, layout{nprocs: producers + 1, cellSize: 256, cellsPerProc: 4})
	recv := queue{sh: &s.proc(producers).recv}

	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			free := queue{sh: &s.proc(p).free}
			for i := 0; i < perProducer; {
				off, c, err := free.dequeue(s)
				if err != nil {
					t.Error(err)
					return
				}
				if off == 0 {
					runtime.Gosched() // all 4 cells in flight: let the consumer run
					continue
				}
				c.src, c.seq = uint32(p), uint32(i)
				binary.LittleEndian.PutUint64(s.payload(off), uint64(p)<<32|uint64(i))
				if err := recv.enqueue(s, off, c); err != nil {
					t.Error(err)
					return
				}
				i++
			}
		}()
	}
	next := make([]uint32, producers)
	for got := 0; got < producers*perProducer; {
		off, c, err := recv.dequeue(s)
		if err != nil {
			t.Fatal(err)
		}
		if off == 0 {
			runtime.Gosched()
			continue
		}
		p := int(c.src)
		if p >= producers || c.owner != uint32(p) {
			t.Fatalf("cell %#x: source %d, owner %d", off, p, c.owner)
		}
		if c.seq != next[p] || binary.LittleEndian.Uint64(s.payload(off)) != uint64(p)<<32|uint64(c.seq) {
			t.Fatalf("producer %d: got element %d, want %d (lost, duplicated or reordered)", p, c.seq, next[p])
		}
		next[p]++
		got++
		if err := (queue{sh: &s.proc(p).free}).enqueue(s, off, c); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if off, _, _ := recv.dequeue(s); off != 0 {
		t.Fatalf("extra element %#x after all were received", off)
	}
	// Every cell is back home exactly once.
	for p := 0; p < producers; p++ {
		free := queue{sh: &s.proc(p).free}
		seen := map[uint64]bool{}
		for {
			off, _, err := free.dequeue(s)
			if err != nil {
				t.Fatal(err)
			}
			if off == 0 {
				break
			}
			if seen[off] {
				t.Fatalf("cell %#x twice in free queue %d", off, p)
			}
			seen[off] = true
		}
		if len(seen) != 4 {
			t.Fatalf("free queue %d holds %d cells, want 4", p, len(seen))
		}
	}
}

// TestQueueCorruptOffset: a link that does not name a cell is reported, and
// nothing outside the cell area is touched.
func TestQueueCorruptOffset(t *testing.T) {
	s := newTestSegment(t, layout{nprocs: 2, cellSize: 256, cellsPerProc: 2})
	q := queue{sh: &s.proc(1).recv}
	for _, bad := range []uint64{8, s.cellOff + 1, s.cellOff - 256, s.cellOff + s.cellBytes, 1 << 62} {
		q.sh.head.Store(bad)
		q.sh.shadow = 0
		if off, _, err := q.dequeue(s); err == nil || off != 0 {
			t.Fatalf("head %#x: dequeue gave %#x, %v; want ErrCorrupt", bad, off, err)
		}
		q.sh.tail.Store(bad)
		off := s.cellOffset(0, 0)
		c := (*cellHdr)(unsafe.Add(s.base, off))
		if err := q.enqueue(s, off, c); err == nil {
			t.Fatalf("tail %#x: enqueue succeeded", bad)
		}
		q.sh.head.Store(0)
		q.sh.tail.Store(0)
	}
}

func BenchmarkEnqueueDequeue(b *testing.B) {
	s := newTestSegment(b, layout{nprocs: 1, cellSize: 256, cellsPerProc: 4})
	free, recv := queue{sh: &s.proc(0).free}, queue{sh: &s.proc(0).recv}
	for b.Loop() {
		off, c, _ := free.dequeue(s)
		recv.enqueue(s, off, c)
		off, c, _ = recv.dequeue(s)
		free.enqueue(s, off, c)
	}
}

// BenchmarkSendRecvInstructions is a ping-pong of 8 bytes between two
// endpoints driven by one goroutine: no waiting, so that running it under
// callgrind counts the instructions of the software path alone (compare
// the table of instructions per send and receive in the MPICH2-Nemesis
// talk, "MPICH2-Nemesis", slides in French, c. 2006). One iteration is
// two messages. The "-iov" variants send and receive lists of three
// entries (Isendv, Irecvv), one of them empty; "fastbox-aggregate" is
// the fastbox ping-pong with the aggregate strategy on both sides, whose
// window must cost nothing when it stays empty.
func BenchmarkSendRecvInstructions(b *testing.B) {
	for _, path := range []string{"fastbox", "queue", "fastbox-iov", "queue-iov", "fastbox-aggregate"} {
		b.Run(path, func(b *testing.B) {
			o := &Options{}
			if strings.HasPrefix(path, "queue") {
				o.FastboxSize = -1
			}
			vec := strings.HasSuffix(path, "-iov")
			eps := joinLocal(b, 2, o)
			a, c := eps[0], eps[1]
			if strings.HasSuffix(path, "-aggregate") {
				a.SetStrategy(Aggregate)
				c.SetStrategy(Aggregate)
			}
			ping, pong := make([]byte, 8), make([]byte, 8)
			pingv, pongv := [][]byte{ping[:3], nil, ping[3:]}, [][]byte{pong[:5], pong[5:], nil}
			var sa, sc, ra, rc Request
			for b.Loop() {
				if vec {
					c.Irecvv(&rc, 0, 1, pongv)
					a.Isendv(&sa, 1, 1, pingv)
				} else {
					c.Irecv(&rc, 0, 1, pong)
					a.Isend(&sa, 1, 1, ping)
				}
				for !rc.Done() {
					c.Poll()
				}
				if vec {
					a.Irecvv(&ra, 1, 1, pingv)
					c.Isendv(&sc, 0, 1, pongv)
				} else {
					a.Irecv(&ra, 1, 1, ping)
					c.Isend(&sc, 0, 1, pong)
				}
				for !ra.Done() {
					a.Poll()
				}
			}
			if st := a.Stats(); strings.HasPrefix(path, "fastbox") && st.QueueMsgs != 0 {
				b.Fatalf("%d of the fastbox ping-pong's messages took the queue", st.QueueMsgs)
			}
		})
	}
}
