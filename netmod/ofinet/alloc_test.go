//go:build ofi

package ofinet

import (
	"sync"
	"testing"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/internal/jobtest"
	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/netmod/ofi"
)

// joinPair joins a job of two ranks on two nodes in this process, both
// modules on 127.0.0.1, with a fresh job key.
func joinPair(t *testing.T) [2]*nemesis.Endpoint {
	t.Helper()
	key, err := jobkey.New()
	if err != nil {
		t.Fatal(err)
	}
	var addrs [2][]byte
	var ex sync.WaitGroup
	ex.Add(2)
	eps := jobtest.InProcess(t, 2, func(job string, r int) (*nemesis.Endpoint, error) {
		m, err := Open(Config{Config: ofi.Config{Provider: provider, Node: "127.0.0.1"}, JobKey: key})
		if err != nil {
			ex.Done()
			return nil, err
		}
		exchange := func(a []byte) ([][]byte, error) {
			addrs[r] = a
			ex.Done()
			ex.Wait()
			return addrs[:], nil
		}
		return nemesis.Join(job, r, 2, &nemesis.Options{JobKey: key, Net: &nemesis.Net{Module: m, Nodes: []int{0, 1}, Exchange: exchange}})
	}, func(ep *nemesis.Endpoint) {
		if ep != nil {
			ep.Close()
		}
	})
	return [2]*nemesis.Endpoint{eps[0], eps[1]}
}

// roundTrips returns a function that sends msg from eps[0] to eps[1] into
// buf, polling both, and fails t unless both complete whole.
func roundTrips(t *testing.T, eps [2]*nemesis.Endpoint) (roundTrip func(msg, buf []byte), s *nemesis.Request) {
	var r nemesis.Request
	s = new(nemesis.Request)
	return func(msg, buf []byte) {
		if err := eps[0].Isend(s, 1, 3, msg); err != nil {
			t.Fatal(err)
		}
		if err := eps[1].Irecv(&r, 0, 3, buf); err != nil {
			t.Fatal(err)
		}
		for !s.Done() || !r.Done() {
			for _, ep := range eps {
				if err := ep.Poll(); err != nil {
					t.Fatal(err)
				}
			}
		}
		_, serr := eps[0].Test(s)
		_, rerr := eps[1].Test(&r)
		if serr != nil || rerr != nil || r.Status().Count != len(msg) {
			t.Fatalf("send %v, receive %v (%d bytes of %d)", serr, rerr, r.Status().Count, len(msg))
		}
	}, s
}

// TestNoAllocationRendezvous: a long message between nodes, through the
// LMT's net-read backend (registration, fi_read, DONE), allocates nothing
// once the first has set the pools up.
func TestNoAllocationRendezvous(t *testing.T) {
	eps := joinPair(t)
	for _, ep := range eps {
		l, err := attach.Attach(ep, attach.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}
	msg := pattern(1<<20, 3)
	buf := make([]byte, len(msg))
	roundTrip, s := roundTrips(t, eps)
	roundTrip(msg, buf)
	if st, _ := attach.Stats(s); st.Backend != lmt.NetRead || string(buf) != string(msg) {
		t.Fatalf("1 MiB between nodes went by %q (want %s), intact %v", st.Backend, lmt.NetRead, string(buf) == string(msg))
	}
	if n := testing.AllocsPerRun(20, func() { roundTrip(msg, buf) }); n != 0 {
		t.Errorf("a 1 MiB message between nodes through the LMT allocates %v times", n)
	}
}

// TestNoAllocation: a message between nodes, of one packet or of several,
// sent and received allocates nothing once the connection is up.
func TestNoAllocation(t *testing.T) {
	eps := joinPair(t)
	small, big := pattern(8, 1), pattern(3*DefaultPacket+5, 2)
	rsmall, rbig := make([]byte, 8), make([]byte, len(big))
	roundTrip, _ := roundTrips(t, eps)
	roundTrip(small, rsmall) // connection setup
	roundTrip(big, rbig)
	if string(rbig) != string(big) || string(rsmall) != string(small) {
		t.Fatal("the messages arrived damaged")
	}
	if n := testing.AllocsPerRun(50, func() { roundTrip(small, rsmall) }); n != 0 {
		t.Errorf("an 8-byte message between nodes allocates %v times", n)
	}
	if n := testing.AllocsPerRun(20, func() { roundTrip(big, rbig) }); n != 0 {
		t.Errorf("a %d-byte message (4 packets) between nodes allocates %v times", len(big), n)
	}
}
