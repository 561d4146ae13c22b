package nemesis

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"
)

// memReader is memModule with one-sided reads: Expose publishes the buffer
// in the fabric under a key, Read starts a read of it (the sender's
// process memory, as fi_read reaches it), and the next Poll lands its
// bytes in the destination and reports it, cancelled if the sender is
// lost by then, as tcp;ofi_rxm cancels the reads of a closed connection
// (after the bytes, as a NIC may have written them already). The LMT's
// net-read backend moves long messages with it in netrdv_test.go.
type memReader struct {
	memModule
	reads              []memRead
	exposed, unexposed int
	readCalls          int
	refuse             int  // Reads to answer "no room" to, first
	spoil              bool // Expose says its handle is 0 bytes long
	full               bool // Send has no room
	hold               bool // Poll reports no read
	failRead           int  // the failRead-th Read fails, if > 0
	landed             int  // reads whose bytes landed
	// piece, when > 0, has reads land in parts of piece bytes, one per
	// Poll and at least every apart, each reported by ReadMoved, while
	// the source's packets to this rank wait behind them (as a read's
	// bytes go first on the wire): a long read over a slow link.
	piece     int
	every     time.Duration
	lastPiece time.Time
	pieces    int // parts landed
}

// memRead is a read in flight: its source region and destination, or the
// error it completes with.
type memRead struct {
	rd  *NetRead
	src int
	buf []byte
	dst [][]byte
	err error
	off int // bytes landed, when the reads land in pieces
}

// errMemCancelled is how memReader completes a read whose sender is lost:
// FI_ECANCELED.
var errMemCancelled = errors.New("memnet: read cancelled, connection closed")

func (m *memReader) Send(r *Request, dst int, hdr []byte, payload [][]byte) (bool, error) {
	if m.full {
		return false, nil
	}
	return m.memModule.Send(r, dst, hdr, payload)
}

func (m *memReader) Expose(dst int, buf []byte, h []byte) (int, int32, error) {
	f := m.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextKey++
	f.regions[f.nextKey] = buf
	binary.LittleEndian.PutUint64(h, uint64(f.nextKey))
	m.exposed++
	if m.spoil {
		return 0, f.nextKey, nil
	}
	return 8, f.nextKey, nil
}

func (m *memReader) Unexpose(slot int32) {
	m.f.mu.Lock()
	delete(m.f.regions, slot)
	m.f.mu.Unlock()
	m.unexposed++
}

func (m *memReader) Read(rd *NetRead, src int, h []byte, dst [][]byte) (bool, error) {
	if len(h) != 8 {
		return false, fmt.Errorf("memnet: %d-byte handle", len(h))
	}
	if m.refuse > 0 {
		m.refuse--
		return false, nil
	}
	m.readCalls++
	if m.readCalls == m.failRead {
		return false, errMemBadRead
	}
	key := int32(binary.LittleEndian.Uint64(h))
	m.f.mu.Lock()
	buf, ok := m.f.regions[key]
	dead := m.f.dead[src]
	m.f.mu.Unlock()
	// The caller may reuse dst once Read returns (net-read does): keep a
	// copy of the list, as a provider copies the iovec.
	r := memRead{rd: rd, src: src, buf: buf, dst: append([][]byte(nil), dst...)}
	if !ok || dead {
		r.err = errMemLost
	}
	if m.piece > 0 && r.err == nil {
		m.f.mu.Lock()
		m.f.serving[src][m.rank] = true
		m.f.mu.Unlock()
	}
	m.reads = append(m.reads, r)
	return true, nil
}

// errMemBadRead is the failure of a Read the module refuses, as a
// provider refuses a bad key.
var errMemBadRead = errors.New("memnet: read refused, bad key")

func (m *memReader) Poll(ev NetEvents) error {
	if m.piece > 0 && !m.hold {
		m.trickle(ev.(NetEventsReader))
		return m.memModule.Poll(ev)
	}
	if !m.hold {
		reads := m.reads
		m.reads = nil
		for _, r := range reads {
			m.land(&r)
			ev.(NetEventsReader).ReadDone(r.rd, r.err)
		}
	}
	return m.memModule.Poll(ev)
}

// trickle lands the next part of the first read in flight, if every has
// passed since the last, and reports the read once all of it landed.
func (m *memReader) trickle(ev NetEventsReader) {
	if len(m.reads) == 0 {
		return
	}
	r := &m.reads[0]
	if r.err == nil {
		if time.Since(m.lastPiece) < m.every {
			return
		}
		m.lastPiece = time.Now()
		k := min(m.piece, len(r.buf)-r.off)
		at := r.off
		for _, d := range r.dst {
			if at >= len(d) {
				at -= len(d)
				continue
			}
			c := copy(d[at:], r.buf[r.off:r.off+k])
			r.off, k, at = r.off+c, k-c, 0
			if k == 0 {
				break
			}
		}
		m.pieces++
		ev.ReadMoved(r.src)
		if r.off < len(r.buf) {
			return
		}
		m.landed++
		m.f.mu.Lock()
		m.f.serving[r.src][m.rank] = false
		m.f.mu.Unlock()
	}
	rd, err := r.rd, r.err
	m.reads = m.reads[1:]
	ev.ReadDone(rd, err)
}

// land writes the bytes of read r into its destination, unless it failed
// at its start, and cancels it if its sender is lost since.
func (m *memReader) land(r *memRead) {
	if r.err != nil {
		return
	}
	buf := r.buf
	for _, d := range r.dst {
		buf = buf[copy(d, buf):]
	}
	m.landed++
	m.f.mu.Lock()
	if m.f.dead[r.src] {
		r.err = errMemCancelled
	}
	m.f.mu.Unlock()
}

// ReadingJob is four ranks on two simulated nodes whose modules read, for
// the external tests of the LMT over the network (netrdv_test.go).
type ReadingJob struct {
	Eps  []*Endpoint
	mods []*memReader
	f    *memFabric
}

// JoinTwoNodesReading joins a ReadingJob.
func JoinTwoNodesReading(t *testing.T) *ReadingJob {
	t.Helper()
	mods := make([]*memReader, 4)
	eps, f := joinTwoNodesWith(t, 4096, func(r int, m *memModule) NetModule {
		mods[r] = &memReader{memModule: *m}
		return mods[r]
	})
	return &ReadingJob{eps, mods, f}
}

// JoinTwoNodesNotReading joins four ranks, two per simulated node, whose
// modules cannot read.
func JoinTwoNodesNotReading(t *testing.T) *ReadingJob {
	t.Helper()
	eps, f := joinTwoNodes(t, 4096)
	return &ReadingJob{Eps: eps, f: f}
}

// Counts returns what rank's module did: buffers exposed and unexposed,
// reads started.
func (j *ReadingJob) Counts(rank int) (exposed, unexposed, reads int) {
	m := j.mods[rank]
	return m.exposed, m.unexposed, m.readCalls
}

// Refuse has rank's module answer its next n reads with "no room"; Refused
// says how many refusals are left.
func (j *ReadingJob) Refuse(rank, n int)   { j.mods[rank].refuse = n }
func (j *ReadingJob) Refused(rank int) int { return j.mods[rank].refuse }

// Hold has rank's module report no read while hold is true: they stay in
// flight, their bytes not landed.
func (j *ReadingJob) Hold(rank int, hold bool) { j.mods[rank].hold = hold }

// FailRead has rank's module fail its nth read from now at its start.
func (j *ReadingJob) FailRead(rank, n int) { j.mods[rank].failRead = j.mods[rank].readCalls + n }

// Landed counts the reads of rank's module whose bytes landed.
func (j *ReadingJob) Landed(rank int) int { return j.mods[rank].landed }

// Spoil has rank's module name its exposed regions with empty handles, as
// a broken module might.
func (j *ReadingJob) Spoil(rank int) { j.mods[rank].spoil = true }

// Fill has rank's module answer every send with "no room" (full) or take
// them again.
func (j *ReadingJob) Fill(rank int, full bool) { j.mods[rank].full = full }

// SlotsHeld counts rank's packet slots not idle: RTSs and control packets
// the module holds or that wait for it.
func (j *ReadingJob) SlotsHeld(rank int) int {
	n := j.Eps[rank].net
	return len(n.ctl) - len(n.ctlFree)
}

// Exposed counts the regions still exposed in the fabric.
func (j *ReadingJob) Exposed() int {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	return len(j.f.regions)
}

// JoinTwoNodesReadingTimeout is JoinTwoNodesReading with Net.PeerTimeout
// peerTimeout.
func JoinTwoNodesReadingTimeout(t *testing.T, peerTimeout time.Duration) *ReadingJob {
	t.Helper()
	mods := make([]*memReader, 4)
	eps, f := joinTwoNodesTimeout(t, 4096, func(r int, m *memModule) NetModule {
		mods[r] = &memReader{memModule: *m}
		return mods[r]
	}, peerTimeout)
	return &ReadingJob{eps, mods, f}
}

// Trickle has rank's module land its reads in parts of piece bytes, at
// least every apart, with the source's packets to rank held behind them;
// Pieces counts the parts landed.
func (j *ReadingJob) Trickle(rank, piece int, every time.Duration) {
	j.mods[rank].piece, j.mods[rank].every = piece, every
}
func (j *ReadingJob) Pieces(rank int) int { return j.mods[rank].pieces }

// Lose makes rank unreachable and tells rank's peer at tells so, as a
// module that found the connection reset does.
func (j *ReadingJob) Lose(rank, at int) {
	j.f.kill(rank)
	(*netEvents)(j.Eps[at]).PeerFailed(rank, errMemLost)
}

// Pattern and OnRanks are pattern and onRanks, and ErrMemBadRead the
// error of a read FailRead fails, for the external tests.
var (
	Pattern       = pattern
	OnRanks       = onRanks
	ErrMemBadRead = errMemBadRead
)
