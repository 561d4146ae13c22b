package nemesis_test

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
)

// The rendezvous of long messages to ranks on other nodes is the LMT's,
// with its net-read backend (package netmod/netread) over the in-memory
// reading module of netrdv_mem_test.go: these tests run the endpoint, the
// engine and the backend together, as a job does.

// attachAll attaches the default LMT to every rank of job.
func attachAll(t *testing.T, job *nemesis.ReadingJob) []*attach.LMT {
	t.Helper()
	ls := make([]*attach.LMT, len(job.Eps))
	for i, ep := range job.Eps {
		l, err := attach.Attach(ep, attach.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ls[i] = l
	}
	t.Cleanup(func() {
		for _, l := range ls {
			l.Close()
		}
	})
	return ls
}

// startExposed starts r, a 1 MiB send from rank 0 to rank 2, polls rank
// 0 once, and checks that its buffer is exposed and r still pending.
func startExposed(t *testing.T, job *nemesis.ReadingJob, r *nemesis.Request) {
	t.Helper()
	ep := job.Eps[0]
	if err := ep.Isend(r, 2, 1, nemesis.Pattern(1<<20, 1)); err != nil {
		t.Fatal(err)
	}
	if err := ep.Poll(); err != nil {
		t.Fatal(err)
	}
	if exposed, _, _ := job.Counts(0); exposed != 1 || r.Done() {
		t.Fatalf("after the RTS: %d exposed, done %v; want 1 and pending", exposed, r.Done())
	}
}

// backendOf names the backend that carried the long message of r, "" for
// an eager one.
func backendOf(r *nemesis.Request) string {
	st, ok := attach.Stats(r)
	if !ok {
		return ""
	}
	return st.Backend
}

// TestNetRendezvous: messages longer than the eager limit to a rank on
// another node go through the LMT's net-read backend: one region exposed,
// one read and one unexpose per non-empty send segment (exact counts),
// nothing left exposed; they arrive intact whether the receive was posted
// first or the RTS waited unexpected (Probe gives its length), into one
// buffer or a list; a message of the eager limit still goes in packets.
func TestNetRendezvous(t *testing.T) {
	job := nemesis.JoinTwoNodesReading(t)
	attachAll(t, job)
	eager := attach.DefaultEagerMax
	sizes := []int{eager, eager + 1, 1<<20 + 3, 1 << 20}
	const vectored = 3 // sent as two segments around an empty one
	backends := make([]string, len(sizes))
	nemesis.OnRanks(t, job.Eps, func(ep *nemesis.Endpoint) error {
		switch ep.Rank() {
		case 0: // a rendezvous send completes once read: Isend them all
			reqs := make([]nemesis.Request, len(sizes)+1)
			for i, n := range sizes {
				msg := nemesis.Pattern(n, i)
				var err error
				if i == vectored {
					err = ep.Isendv(&reqs[i], 2, i, [][]byte{msg[:n/3], nil, msg[n/3:]})
				} else {
					err = ep.Isend(&reqs[i], 2, i, msg)
				}
				if err != nil {
					return err
				}
			}
			if err := ep.Isend(&reqs[len(sizes)], 2, 99, nil); err != nil {
				return err
			}
			for i := range reqs {
				if err := ep.Wait(&reqs[i]); err != nil {
					return err
				}
			}
			for i := range sizes {
				backends[i] = backendOf(&reqs[i])
			}
		case 2:
			if _, err := ep.Probe(0, 99); err != nil { // every RTS is here, unexpected
				return err
			}
			for i, n := range sizes {
				st, err := ep.Probe(0, i)
				if err != nil || st.Len != n {
					return fmt.Errorf("probe %d: %+v, %v; want %d bytes", i, st, err, n)
				}
				buf := make([]byte, n)
				iov := [][]byte{buf[:n/5], nil, buf[n/5:]}
				if st, err = ep.Recvv(0, i, iov); err != nil || st.Len != n {
					return fmt.Errorf("receive %d: %+v, %v", i, st, err)
				}
				if crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(nemesis.Pattern(n, i)) {
					return fmt.Errorf("%d bytes from rank 0: checksum differs", n)
				}
			}
			_, err := ep.Recv(0, 99, nil)
			return err
		}
		return nil
	})
	if want := []string{"", lmt.NetRead, lmt.NetRead, lmt.NetRead}; fmt.Sprint(backends) != fmt.Sprint(want) {
		t.Errorf("backends %q, want %q", backends, want)
	}
	exposed, unexposed, _ := job.Counts(0)
	_, _, reads := job.Counts(2)
	if exposed != 4 || unexposed != 4 || reads != 4 {
		t.Fatalf("exposed %d, unexposed %d, read %d times; want 4, 4, 4 (three messages past %d bytes, one of two segments)", exposed, unexposed, reads, eager)
	}
	if n := job.Exposed(); n != 0 {
		t.Fatalf("%d regions left exposed", n)
	}
}

// TestNetRendezvousTruncates: a receive shorter than a rendezvous message
// reads only what fits (guard bytes past it untouched) and fails with
// ErrTruncated; the sender completes without error.
func TestNetRendezvousTruncates(t *testing.T) {
	job := nemesis.JoinTwoNodesReading(t)
	attachAll(t, job)
	const n, room = 1 << 20, 100000
	nemesis.OnRanks(t, job.Eps, func(ep *nemesis.Endpoint) error {
		switch ep.Rank() {
		case 1:
			return ep.Send(3, 5, nemesis.Pattern(n, 5))
		case 3:
			buf := bytes.Repeat([]byte{0xee}, room+64)
			st, err := ep.Recv(1, 5, buf[:room])
			if !errors.Is(err, nemesis.ErrTruncated) || st.Len != n || st.Count != room {
				return fmt.Errorf("%d bytes into %d: %+v, %v; want ErrTruncated, %d counted", n, room, st, err, room)
			}
			if !bytes.Equal(buf[:room], nemesis.Pattern(n, 5)[:room]) || !bytes.Equal(buf[room:], bytes.Repeat([]byte{0xee}, 64)) {
				return errors.New("truncated rendezvous: wrong bytes, or bytes written past the buffer")
			}
		}
		return nil
	})
	if n := job.Exposed(); n != 0 {
		t.Fatalf("%d regions left exposed", n)
	}
}

// TestNetRendezvousReaderLost: the receiver of a rendezvous is lost before
// it reads: the sender, waiting for DONE, fails naming it, and its buffer
// is no longer exposed.
func TestNetRendezvousReaderLost(t *testing.T) {
	job := nemesis.JoinTwoNodesReading(t)
	attachAll(t, job)
	ep := job.Eps[0]
	var r nemesis.Request
	startExposed(t, job, &r)
	job.Lose(2, 0)
	err := ep.Wait(&r)
	var pe *nemesis.PeerError
	if !errors.As(err, &pe) || pe.Rank != 2 {
		t.Fatalf("send to a lost reader: %v, want a *PeerError naming rank 2", err)
	}
	if _, unexposed, _ := job.Counts(0); unexposed != 1 || job.Exposed() != 0 {
		t.Fatalf("%d unexposed, %d regions left; want 1 and none", unexposed, job.Exposed())
	}
}

// TestNetRendezvousReadWaitsForRoom: a read the module has no room for
// waits, and starts at a later Poll; the message arrives intact.
func TestNetRendezvousReadWaitsForRoom(t *testing.T) {
	job := nemesis.JoinTwoNodesReading(t)
	attachAll(t, job)
	job.Refuse(3, 3)
	const n = 1 << 20
	nemesis.OnRanks(t, job.Eps, func(ep *nemesis.Endpoint) error {
		switch ep.Rank() {
		case 1:
			return ep.Send(3, 5, nemesis.Pattern(n, 5))
		case 3:
			buf := make([]byte, n)
			if _, err := ep.Recv(1, 5, buf); err != nil {
				return err
			}
			if !bytes.Equal(buf, nemesis.Pattern(n, 5)) {
				return errors.New("rendezvous after waiting for room: bytes differ")
			}
		}
		return nil
	})
	if _, _, reads := job.Counts(3); job.Refused(3) != 0 || reads != 1 {
		t.Fatalf("%d refusals left, %d reads; want 0 and 1", job.Refused(3), reads)
	}
}

// TestNetRendezvousCorruptHandle: an RTS whose region has an empty key is
// refused by the receiver, naming the sender and what is wrong, with its
// buffer untouched; the sender fails with the receiver's word, and
// unexposes its buffer.
func TestNetRendezvousCorruptHandle(t *testing.T) {
	job := nemesis.JoinTwoNodesReading(t)
	attachAll(t, job)
	job.Spoil(0)
	const n = 1 << 20
	nemesis.OnRanks(t, job.Eps, func(ep *nemesis.Endpoint) error {
		switch ep.Rank() {
		case 0:
			err := ep.Send(2, 1, nemesis.Pattern(n, 1))
			var re *lmt.RemoteError
			if !errors.As(err, &re) || re.Rank != 2 || !strings.Contains(re.Msg, "net-read region") {
				return fmt.Errorf("send with a spoiled key: %v, want rank 2's RemoteError naming the net-read region", err)
			}
		case 2:
			buf := bytes.Repeat([]byte{0xee}, n)
			_, err := ep.Recv(0, 1, buf)
			var ce *lmt.CorruptError
			if !errors.As(err, &ce) || ce.Rank != 0 || ce.Field != "net-read region" {
				return fmt.Errorf("receive of a spoiled key: %v, want a CorruptError naming rank 0 and the net-read region", err)
			}
			if !bytes.Equal(buf, bytes.Repeat([]byte{0xee}, n)) {
				return errors.New("a refused rendezvous wrote into the receive buffer")
			}
		}
		return nil
	})
	if _, _, reads := job.Counts(2); reads != 0 || job.Exposed() != 0 {
		t.Fatalf("%d reads, %d regions left exposed; want none", reads, job.Exposed())
	}
}

// TestNetRendezvousBothPaths: one engine carries rank 0's long messages to
// its node's rank 1 by a backend of the node and to rank 2, on the other
// node, by net-read, and to no rank by the other kind: the engine refuses
// either kind for the other kind of peer, saying why.
func TestNetRendezvousBothPaths(t *testing.T) {
	job := nemesis.JoinTwoNodesReading(t)
	ls := attachAll(t, job)
	const n, rounds = 1 << 20, 3
	count := map[string]int{} // rank 0's sends, by backend
	nemesis.OnRanks(t, job.Eps, func(ep *nemesis.Endpoint) error {
		switch ep.Rank() {
		case 0:
			for i := range rounds {
				for _, dst := range []int{1, 2} {
					var r nemesis.Request
					if err := ep.Isend(&r, dst, i, nemesis.Pattern(n, i+dst)); err != nil {
						return err
					}
					if err := ep.Wait(&r); err != nil {
						return err
					}
					count[fmt.Sprint(dst, " ", backendOf(&r))]++
				}
			}
		case 1, 2:
			buf := make([]byte, n)
			for i := range rounds {
				if _, err := ep.Recv(0, i, buf); err != nil {
					return err
				}
				if crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(nemesis.Pattern(n, i+ep.Rank())) {
					return fmt.Errorf("rank %d, message %d from rank 0: checksum differs", ep.Rank(), i)
				}
			}
		}
		return nil
	})
	local := lmt.DefaultPreference()[0]
	if want := fmt.Sprint(map[string]int{"1 " + local: rounds, "2 " + lmt.NetRead: rounds}); fmt.Sprint(count) != want {
		t.Errorf("rank 0's long sends by destination and backend: %v, want %v", count, want)
	}
	eng := ls[0].Engine()
	for _, c := range []struct {
		backend string
		rank    int
		reason  string
	}{
		{local, 2, "rank 2 is on another node"},
		{lmt.CMA, 3, "rank 3 is on another node"},
		{lmt.NetRead, 1, "rank 1 is on this node"},
	} {
		err := eng.Check(c.backend, c.rank)
		var u *lmt.Unavailable
		if !errors.As(err, &u) || !strings.Contains(u.Reason, c.reason) {
			t.Errorf("Check(%s, rank %d): %v, want an *lmt.Unavailable saying %q", c.backend, c.rank, err, c.reason)
		}
	}
	if n := job.Exposed(); n != 0 {
		t.Fatalf("%d regions left exposed", n)
	}
}

// TestNetRendezvousNeedsReads: with a module that cannot read, a long
// message to a remote rank goes in packets, intact, and the engine says
// why net-read cannot carry it; one to the node's rank still goes
// through the LMT.
func TestNetRendezvousNeedsReads(t *testing.T) {
	job := nemesis.JoinTwoNodesNotReading(t)
	ls := attachAll(t, job)
	const n = 1 << 20
	backends := map[int]string{}
	nemesis.OnRanks(t, job.Eps, func(ep *nemesis.Endpoint) error {
		switch ep.Rank() {
		case 0:
			for _, dst := range []int{1, 2} {
				var r nemesis.Request
				if err := ep.Isend(&r, dst, 1, nemesis.Pattern(n, dst)); err != nil {
					return err
				}
				if err := ep.Wait(&r); err != nil {
					return err
				}
				backends[dst] = backendOf(&r)
			}
		case 1, 2:
			buf := make([]byte, n)
			if _, err := ep.Recv(0, 1, buf); err != nil {
				return err
			}
			if !bytes.Equal(buf, nemesis.Pattern(n, ep.Rank())) {
				return fmt.Errorf("rank %d: the message from rank 0 differs", ep.Rank())
			}
		}
		return nil
	})
	if backends[1] != lmt.DefaultPreference()[0] || backends[2] != "" {
		t.Errorf("backends to ranks 1 and 2: %q, %q; want %q and none (packets)", backends[1], backends[2], lmt.DefaultPreference()[0])
	}
	err := ls[0].Engine().Check(lmt.NetRead, 2)
	var u *lmt.Unavailable
	if !errors.As(err, &u) || !strings.Contains(u.Reason, "no network module that reads remote memory") {
		t.Errorf("Check(net-read, rank 2) over a module that cannot read: %v", err)
	}
}

// TestNetRendezvousSenderLostWhileReading: the sender is lost while the
// receiver's read is in flight: the receive stays pending while the
// module has not reported the read, then fails naming the sender once
// the module cancels it, with the bytes that landed before (never
// after: the buffer is the user's again); the receiver then takes the
// next rendezvous, from another rank, intact; nothing is left exposed.
func TestNetRendezvousSenderLostWhileReading(t *testing.T) {
	const n = 1 << 20
	var r nemesis.Request
	job, ls, buf := startReading(t, &r, n)
	job.Lose(0, 2)
	pollPending(t, job, 2, &r, "receive from a sender lost mid-read")
	job.Hold(2, false)
	err := job.Eps[2].Wait(&r)
	var pe *nemesis.PeerError
	if !errors.As(err, &pe) || pe.Rank != 0 {
		t.Fatalf("receive from a sender lost mid-read: %v, want a *PeerError naming rank 0", err)
	}
	if job.Landed(2) != 1 || !bytes.Equal(buf, nemesis.Pattern(n, 1)) {
		t.Fatalf("%d reads landed before the receive completed, bytes intact %v; want 1, true", job.Landed(2), bytes.Equal(buf, nemesis.Pattern(n, 1)))
	}
	checkUntouched(t, job, 2, buf)
	nemesis.OnRanks(t, job.Eps[1:3], func(ep *nemesis.Endpoint) error {
		if ep.Rank() == 1 {
			return ep.Send(2, 2, nemesis.Pattern(n, 2))
		}
		if _, err := ep.Recv(1, 2, buf); err != nil {
			return err
		}
		if !bytes.Equal(buf, nemesis.Pattern(n, 2)) {
			return errors.New("the rendezvous after a lost one: bytes differ")
		}
		return nil
	})
	if _, _, reads := job.Counts(2); reads != 2 {
		t.Fatalf("%d reads, want 2", reads)
	}
	if err := ls[0].Close(); err != nil { // the send to rank 2 waits for its DONE
		t.Fatal(err)
	}
	if exposed, unexposed, _ := job.Counts(0); exposed != 1 || unexposed != 1 || job.Exposed() != 0 {
		t.Fatalf("rank 0 exposed %d, unexposed %d; %d regions left; want 1, 1, none", exposed, unexposed, job.Exposed())
	}
}

// TestNetRendezvousReadFails: the second of a receive's two reads fails
// at its start while the first is in flight: the receive stays pending
// until the module has reported the first, then fails with the module's
// error, its first half landed and the second untouched, and no byte
// written after; the sender fails with the receiver's word and unexposes
// both regions.
func TestNetRendezvousReadFails(t *testing.T) {
	job := nemesis.JoinTwoNodesReading(t)
	attachAll(t, job)
	const n, half = 1 << 20, 1 << 19
	msg := nemesis.Pattern(n, 3)
	var s, r nemesis.Request
	if err := job.Eps[0].Isendv(&s, 2, 3, [][]byte{msg[:half], msg[half:]}); err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte{0xee}, n)
	if err := job.Eps[2].Irecv(&r, 0, 3, buf); err != nil {
		t.Fatal(err)
	}
	job.Hold(2, true)
	job.FailRead(2, 2)
	pollUntilReads(t, job, 2, 2)
	pollPending(t, job, 2, &r, "receive whose second read failed")
	job.Hold(2, false)
	if err := job.Eps[2].Wait(&r); !errors.Is(err, nemesis.ErrMemBadRead) {
		t.Fatalf("receive whose second read failed: %v, want the module's error", err)
	}
	if job.Landed(2) != 1 || !bytes.Equal(buf[:half], msg[:half]) || !bytes.Equal(buf[half:], bytes.Repeat([]byte{0xee}, n-half)) {
		t.Fatalf("%d reads landed; want 1: the first half read, the second untouched", job.Landed(2))
	}
	checkUntouched(t, job, 2, buf)
	var re *lmt.RemoteError
	if err := job.Eps[0].Wait(&s); !errors.As(err, &re) || re.Rank != 2 {
		t.Fatalf("send whose receiver's read failed: %v, want rank 2's RemoteError", err)
	}
	if exposed, unexposed, _ := job.Counts(0); exposed != 2 || unexposed != 2 || job.Exposed() != 0 {
		t.Fatalf("rank 0 exposed %d, unexposed %d; %d regions left; want 2, 2, none", exposed, unexposed, job.Exposed())
	}
}

// TestNetRendezvousClosedWhileReading: the receiver's engine closes while
// its read is in flight: Close does not complete the receive, which
// stays pending until the module reports the read, then fails with
// lmt.ErrClosed, the bytes landed before and none after.
func TestNetRendezvousClosedWhileReading(t *testing.T) {
	const n = 1 << 20
	var r nemesis.Request
	job, ls, buf := startReading(t, &r, n)
	eng := ls[2].Engine()
	if err := eng.Close(); err != nil || eng.Pending() != 1 {
		t.Fatalf("Close with a read in flight: %v, %d pending; want nil, 1", err, eng.Pending())
	}
	pollPending(t, job, 2, &r, "receive closed mid-read")
	job.Hold(2, false)
	if err := job.Eps[2].Wait(&r); !errors.Is(err, lmt.ErrClosed) {
		t.Fatalf("receive closed mid-read: %v, want lmt.ErrClosed", err)
	}
	if job.Landed(2) != 1 || eng.Pending() != 0 {
		t.Fatalf("%d reads landed, %d pending; want 1, none", job.Landed(2), eng.Pending())
	}
	checkUntouched(t, job, 2, buf)
}

// startReading joins a reading job with an LMT on every rank, has rank 0
// send n bytes to rank 2, received by r, and polls rank 2 until its
// module holds the read in flight; it returns r's buffer.
func startReading(t *testing.T, r *nemesis.Request, n int) (*nemesis.ReadingJob, []*attach.LMT, []byte) {
	t.Helper()
	job := nemesis.JoinTwoNodesReading(t)
	ls := attachAll(t, job)
	var s nemesis.Request
	if err := job.Eps[0].Isend(&s, 2, 1, nemesis.Pattern(n, 1)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, n)
	if err := job.Eps[2].Irecv(r, 0, 1, buf); err != nil {
		t.Fatal(err)
	}
	job.Hold(2, true)
	pollUntilReads(t, job, 2, 1)
	return job, ls, buf
}

// pollUntilReads polls rank until its module has started reads reads.
func pollUntilReads(t *testing.T, job *nemesis.ReadingJob, rank, reads int) {
	t.Helper()
	for i := 0; ; i++ {
		if _, _, n := job.Counts(rank); n == reads {
			return
		}
		if err := job.Eps[rank].Poll(); err != nil || i == 1000 {
			t.Fatalf("%d reads not started after %d polls: %v", reads, i, err)
		}
	}
}

// pollPending polls rank while its module holds its reads, and checks
// that r, failed, still waits for them.
func pollPending(t *testing.T, job *nemesis.ReadingJob, rank int, r *nemesis.Request, what string) {
	t.Helper()
	for range 100 {
		if err := job.Eps[rank].Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if r.Done() || job.Landed(rank) != 0 {
		t.Fatalf("%s: done %v with %d reads landed; want pending, none landed", what, r.Done(), job.Landed(rank))
	}
}

// checkUntouched writes a pattern into buf, a completed receive's buffer,
// polls rank, and checks that no late read changed it.
func checkUntouched(t *testing.T, job *nemesis.ReadingJob, rank int, buf []byte) {
	t.Helper()
	want := bytes.Repeat([]byte{0x5a}, len(buf))
	copy(buf, want)
	for range 100 {
		if err := job.Eps[rank].Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(buf, want) {
		t.Fatal("a read wrote into the receive buffer after the receive completed")
	}
}

// TestNetRendezvousTooManySegments: a long send to a remote rank of more
// segments than an RTS names fails, saying so, not that the node's
// backends cannot reach the rank; nothing is left exposed.
func TestNetRendezvousTooManySegments(t *testing.T) {
	job := nemesis.JoinTwoNodesReading(t)
	attachAll(t, job)
	segs := lmt.DefaultMaxSegments + 1
	msg := nemesis.Pattern(segs*4096, 1)
	iov := make([][]byte, segs)
	for i := range iov {
		iov[i] = msg[i*4096 : (i+1)*4096]
	}
	err := job.Eps[0].Sendv(2, 1, iov)
	if want := fmt.Sprintf("backend %s: %d segments do not fit its handle", lmt.NetRead, segs); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("send of %d segments to a remote rank: %v, want net-read's segment limit", segs, err)
	}
	if exposed, _, _ := job.Counts(0); exposed != 0 || job.Exposed() != 0 {
		t.Fatalf("%d exposed, %d left; want none", exposed, job.Exposed())
	}
}

// TestNetRendezvousClosedBeforeRTS: an LMT send whose RTS waits for room
// in the module when the engine closes fails with lmt.ErrClosed, its
// buffer unexposed, and leaves the pair's window: the next message to the
// rank goes and arrives.
func TestNetRendezvousClosedBeforeRTS(t *testing.T) {
	job := nemesis.JoinTwoNodesReading(t)
	ls := attachAll(t, job)
	ep := job.Eps[0]
	job.Fill(0, true)
	var r nemesis.Request
	startExposed(t, job, &r)
	if err := ls[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := ep.Wait(&r); !errors.Is(err, lmt.ErrClosed) {
		t.Fatalf("send whose RTS never left, engine closed: %v, want lmt.ErrClosed", err)
	}
	if _, unexposed, _ := job.Counts(0); unexposed != 1 || job.Exposed() != 0 || job.SlotsHeld(0) != 0 {
		t.Fatalf("%d unexposed, %d left, %d packet slots held; want 1, none, none", unexposed, job.Exposed(), job.SlotsHeld(0))
	}
	job.Fill(0, false)
	nemesis.OnRanks(t, []*nemesis.Endpoint{ep, job.Eps[2]}, func(ep *nemesis.Endpoint) error {
		if ep.Rank() == 0 {
			return ep.Send(2, 5, []byte("after"))
		}
		buf := make([]byte, 8)
		st, err := ep.Recv(0, nemesis.AnyTag, buf)
		if err != nil || st.Tag != 5 || string(buf[:st.Len]) != "after" {
			return fmt.Errorf("first message after the closed rendezvous: %+v %q, %v; want tag 5, \"after\"", st, buf[:st.Len], err)
		}
		return nil
	})
}

// TestNetLivenessHearsReads: a sender whose pongs wait behind the bytes of
// a read it serves (as they do on one TCP stream) is not taken for lost
// by its reader, however long the read takes, as long as parts of it keep
// landing: rank 2 reads 1 MiB from rank 0 in 16 parts landing at least a
// quarter of Net.PeerTimeout apart, so that the read lasts several
// timeouts while nothing else comes from rank 0; the receive completes
// intact, the send too. Ranks 1 and 3 wait for a word from 2 and 0 that
// comes after, so that every rank answers the probes of the others.
func TestNetLivenessHearsReads(t *testing.T) {
	const timeout = 100 * time.Millisecond
	const n, piece = 1 << 20, 64 << 10
	job := nemesis.JoinTwoNodesReadingTimeout(t, timeout)
	attachAll(t, job)
	job.Trickle(2, piece, timeout/4)
	msg := nemesis.Pattern(n, 5)
	nemesis.OnRanks(t, job.Eps, func(ep *nemesis.Endpoint) error {
		switch ep.Rank() {
		case 0:
			if err := ep.Send(2, 5, msg); err != nil {
				return fmt.Errorf("rank 0's send to rank 2: %w", err)
			}
			return ep.Send(3, 6, []byte("done"))
		case 2:
			buf := make([]byte, n)
			if _, err := ep.Recv(0, 5, buf); err != nil {
				return fmt.Errorf("rank 2's receive from rank 0: %w", err)
			}
			if crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(msg) {
				return errors.New("rank 2's receive from rank 0: checksum differs")
			}
			return ep.Send(1, 6, []byte("done"))
		default:
			_, err := ep.Recv(map[int]int{1: 2, 3: 0}[ep.Rank()], 6, make([]byte, 4))
			return err
		}
	})
	if got := job.Pieces(2); got != n/piece {
		t.Fatalf("the read landed in %d parts, want %d", got, n/piece)
	}
}

// TestNetLivenessSilentPeer: a remote rank from which nothing comes is
// still taken for lost after Net.PeerTimeout: rank 2's receive from rank
// 0, which never polls (so never answers a probe), fails with a PeerError
// naming rank 0 and the timeout, no sooner than the timeout.
func TestNetLivenessSilentPeer(t *testing.T) {
	const timeout = 100 * time.Millisecond
	job := nemesis.JoinTwoNodesReadingTimeout(t, timeout)
	start := time.Now()
	_, err := job.Eps[2].Recv(0, 5, make([]byte, 64))
	var pe *nemesis.PeerError
	if !errors.As(err, &pe) || pe.Rank != 0 || !errors.Is(err, nemesis.ErrPeerDead) || !strings.Contains(err.Error(), "no answer to liveness probes for 100ms (Net.PeerTimeout)") {
		t.Fatalf("receive from a silent rank 0: %v, want a PeerError naming rank 0 and Net.PeerTimeout", err)
	}
	if took := time.Since(start); took < timeout {
		t.Fatalf("rank 0 taken for lost after %v, before the %v timeout", took, timeout)
	}
}
