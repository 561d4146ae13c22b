package nemesis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"
)

// memReader is memModule with one-sided reads: Expose publishes the buffer
// in the fabric under a key, Read copies from it (the sender's process
// memory, as fi_read reaches it) and reports at the next Poll.
type memReader struct {
	memModule
	reads              []*Request
	readErrs           []error
	exposed, unexposed int
	readCalls          int
	refuse             int // Reads to answer "no room" to, first
}

func (m *memReader) Expose(dst int, buf []byte, h []byte) (int, int32, error) {
	f := m.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextKey++
	f.regions[f.nextKey] = buf
	binary.LittleEndian.PutUint64(h, uint64(f.nextKey))
	m.exposed++
	return 8, f.nextKey, nil
}

func (m *memReader) Unexpose(slot int32) {
	m.f.mu.Lock()
	delete(m.f.regions, slot)
	m.f.mu.Unlock()
	m.unexposed++
}

func (m *memReader) Read(r *Request, src int, h []byte, dst [][]byte) (bool, error) {
	if len(h) != 8 {
		return false, fmt.Errorf("memnet: %d-byte handle", len(h))
	}
	if m.refuse > 0 {
		m.refuse--
		return false, nil
	}
	key := int32(binary.LittleEndian.Uint64(h))
	m.f.mu.Lock()
	buf, ok := m.f.regions[key]
	dead := m.f.dead[src]
	m.f.mu.Unlock()
	var err error
	if !ok || dead {
		err = errMemLost
	} else {
		for _, d := range dst {
			buf = buf[copy(d, buf):]
		}
	}
	m.readCalls++
	m.reads, m.readErrs = append(m.reads, r), append(m.readErrs, err)
	return true, nil
}

func (m *memReader) Poll(ev NetEvents) error {
	reads, errs := m.reads, m.readErrs
	m.reads, m.readErrs = nil, nil
	for i, r := range reads {
		ev.(NetEventsReader).ReadDone(r, errs[i])
	}
	return m.memModule.Poll(ev)
}

// joinTwoNodesReading is joinTwoNodes with modules that read.
func joinTwoNodesReading(t *testing.T) ([]*Endpoint, []*memReader, *memFabric) {
	t.Helper()
	mods := make([]*memReader, 4)
	eps, f := joinTwoNodesWith(t, 4096, func(r int, m *memModule) NetModule {
		mods[r] = &memReader{memModule: *m}
		return mods[r]
	})
	return eps, mods, f
}

// TestNetRendezvous: messages of NetRendezvousMin bytes and more to a rank
// on another node go by one RTS, one read and one DONE (exact counts), and
// arrive intact whether the receive was posted first or the RTS waited
// unexpected (Probe gives its length), into one buffer or a list; a
// shorter message still goes in packets.
func TestNetRendezvous(t *testing.T) {
	eps, mods, f := joinTwoNodesReading(t)
	sizes := []int{NetRendezvousMin - 1, NetRendezvousMin, 1<<20 + 3}
	onRanks(t, eps, func(ep *Endpoint) error {
		switch ep.Rank() {
		case 0: // a rendezvous send completes once read: Isend them all
			reqs := make([]Request, len(sizes)+1)
			for i, n := range sizes {
				if err := ep.Isend(&reqs[i], 2, i, pattern(n, i)); err != nil {
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
				iov := [][]byte{buf[:n/3], nil, buf[n/3:]}
				if st, err = ep.Recvv(0, i, iov); err != nil || st.Len != n {
					return fmt.Errorf("receive %d: %+v, %v", i, st, err)
				}
				if crc32.ChecksumIEEE(buf) != crc32.ChecksumIEEE(pattern(n, i)) {
					return fmt.Errorf("%d bytes from rank 0: checksum differs", n)
				}
			}
			_, err := ep.Recv(0, 99, nil)
			return err
		}
		return nil
	})
	if s, r := mods[0], mods[2]; s.exposed != 2 || s.unexposed != 2 || r.readCalls != 2 {
		t.Fatalf("exposed %d, unexposed %d, read %d times; want 2, 2, 2 (two messages of at least %d bytes)", s.exposed, s.unexposed, r.readCalls, NetRendezvousMin)
	}
	if len(f.regions) != 0 {
		t.Fatalf("%d regions left exposed", len(f.regions))
	}
}

// TestNetRendezvousTruncates: a receive shorter than a rendezvous message
// reads only what fits (guard bytes past it untouched) and fails with
// ErrTruncated; the sender completes without error.
func TestNetRendezvousTruncates(t *testing.T) {
	eps, _, _ := joinTwoNodesReading(t)
	const n, room = 1 << 20, 100000
	onRanks(t, eps, func(ep *Endpoint) error {
		switch ep.Rank() {
		case 1:
			return ep.Send(3, 5, pattern(n, 5))
		case 3:
			buf := bytes.Repeat([]byte{0xee}, room+64)
			st, err := ep.Recv(1, 5, buf[:room])
			if !errors.Is(err, ErrTruncated) || st.Len != n || st.Count != room {
				return fmt.Errorf("%d bytes into %d: %+v, %v; want ErrTruncated, %d counted", n, room, st, err, room)
			}
			if !bytes.Equal(buf[:room], pattern(n, 5)[:room]) || !bytes.Equal(buf[room:], bytes.Repeat([]byte{0xee}, 64)) {
				return errors.New("truncated rendezvous: wrong bytes, or bytes written past the buffer")
			}
		}
		return nil
	})
}

// TestNetRendezvousReaderLost: the receiver of a rendezvous is lost before
// it reads: the sender, waiting for DONE, fails naming it, and its buffer
// is no longer exposed.
func TestNetRendezvousReaderLost(t *testing.T) {
	eps, mods, f := joinTwoNodesReading(t)
	var r Request
	if err := eps[0].Isend(&r, 2, 1, pattern(1<<20, 1)); err != nil {
		t.Fatal(err)
	}
	if err := eps[0].Poll(); err != nil {
		t.Fatal(err)
	}
	if mods[0].exposed != 1 || r.Done() {
		t.Fatalf("after the RTS: %d exposed, done %v; want 1 and pending", mods[0].exposed, r.Done())
	}
	f.kill(2)
	(*netEvents)(eps[0]).PeerFailed(2, errMemLost)
	err := eps[0].Wait(&r)
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Rank != 2 {
		t.Fatalf("send to a lost reader: %v, want a *PeerError naming rank 2", err)
	}
	if mods[0].unexposed != 1 || len(f.regions) != 0 {
		t.Fatalf("%d unexposed, %d regions left; want 1 and none", mods[0].unexposed, len(f.regions))
	}
}

// TestNetRendezvousReadWaitsForRoom: a read the module has no room for
// waits, and starts at a later Poll; the message arrives intact.
func TestNetRendezvousReadWaitsForRoom(t *testing.T) {
	eps, mods, _ := joinTwoNodesReading(t)
	mods[3].refuse = 3
	const n = 1 << 20
	onRanks(t, eps, func(ep *Endpoint) error {
		switch ep.Rank() {
		case 1:
			return ep.Send(3, 5, pattern(n, 5))
		case 3:
			buf := make([]byte, n)
			if _, err := ep.Recv(1, 5, buf); err != nil {
				return err
			}
			if !bytes.Equal(buf, pattern(n, 5)) {
				return errors.New("rendezvous after waiting for room: bytes differ")
			}
		}
		return nil
	})
	if mods[3].refuse != 0 || mods[3].readCalls != 1 {
		t.Fatalf("%d refusals left, %d reads; want 0 and 1", mods[3].refuse, mods[3].readCalls)
	}
}
