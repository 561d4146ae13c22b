//go:build ofi

package ofinet

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/netmod/ofi"
)

// The module's one-sided reads (nemesis.NetReader), which the LMT's
// net-read backend (package netmod/netread) moves long messages with: a
// send buffer is registered (fi_mr_reg, remote read) and its address and
// key travel in the LMT's RTS; the receiver pulls it with fi_read into its
// own buffer, in parts of readPart bytes, at most readDepth of them in
// flight per receive, drawing on the send slots: the module issues the
// next parts as the first complete (issue, at every Poll). Regions, read
// jobs and their lists are pooled: a steady stream of long messages
// registers and reads without allocating.
//
// Why parts: the source's packets to this rank, the pong to a liveness
// probe among them, wait on the wire behind the bytes of the read it
// serves; the completion of each part tells nemesis that the source
// lives (NetEventsReader.ReadMoved), so that a read longer than
// Net.PeerTimeout, on a slow link or a machine whose CPUs other processes
// hold, never gets its source taken for lost while its bytes still come.

// readPart is the most one fi_read moves; readDepth, the parts of one
// receive in flight at once. A part lands within a small fraction of
// Net.PeerTimeout even when the two processes get little CPU (the
// provider moves a socket's bytes only when its process polls), and the
// depth keeps the link busy between two polls.
const (
	readPart  = 128 << 10
	readDepth = 8
)

// readJob is the reads of one receive: its parts still to issue
// (dst[next:], from region offset off) and in flight (left); reported once
// none is left.
type readJob struct {
	rd   *nemesis.NetRead
	src  int
	rr   ofi.RemoteRegion
	dst  [][]byte // the receive list; dst[next:] not yet issued
	next int
	off  uint64 // region offset of dst[next]
	left int
	err  error
}

// Expose implements nemesis.NetReader.
func (m *Module) Expose(dst int, buf []byte, h []byte) (int, int32, error) {
	if len(h) < ofi.RemoteRegionSize {
		return 0, 0, fmt.Errorf("ofinet: a %d-byte handle cannot hold a region (%d bytes)", len(h), ofi.RemoteRegionSize)
	}
	if len(m.regFree) == 0 {
		m.regions = append(m.regions, new(ofi.Region))
		m.regFree = append(m.regFree, int32(len(m.regions)-1))
	}
	slot := m.regFree[len(m.regFree)-1]
	reg := m.regions[slot]
	if err := m.e.Register(reg, buf); err != nil {
		return 0, 0, fmt.Errorf("ofinet: registering %d bytes for rank %d: %w", len(buf), dst, err)
	}
	m.regFree = m.regFree[:len(m.regFree)-1]
	m.exposures++
	reg.Remote().Put(h)
	return ofi.RemoteRegionSize, slot, nil
}

// Exposures counts the buffers Expose registered: the segments of the
// long messages this module's endpoint sent through the LMT.
func (m *Module) Exposures() uint64 { return m.exposures }

// Unexpose implements nemesis.NetReader. Reads of the region still in
// flight (a reader the endpoint gave up on) fail at the reader.
func (m *Module) Unexpose(slot int32) {
	_ = m.regions[slot].Close() // the region was registered by Expose
	m.regFree = append(m.regFree, slot)
}

// Read implements nemesis.NetReader: the first parts of dst now (false
// when no slot is free), the rest as they complete.
func (m *Module) Read(rd *nemesis.NetRead, src int, h []byte, dst [][]byte) (bool, error) {
	if len(h) != ofi.RemoteRegionSize {
		return false, fmt.Errorf("ofinet: rank %d's rendezvous names a %d-byte handle, want %d", src, len(h), ofi.RemoteRegionSize)
	}
	if len(m.free) == 0 {
		return false, nil
	}
	j := m.newJob(rd)
	j.src, j.rr = src, ofi.GetRemoteRegion(h)
	for _, d := range dst {
		if len(d) > 0 {
			j.dst = append(j.dst, d)
		}
	}
	if err := m.issue(j); j.left == 0 && j.next < len(j.dst) {
		m.freeJob(j)
		if err == nil || errors.Is(err, ofi.ErrNoSlot) {
			return false, nil
		}
		return false, err
	}
	m.reading = append(m.reading, j)
	return true, nil
}

// issue starts j's next parts while it has fewer than readDepth in flight
// and a slot is free. A part the endpoint cannot take now (ErrNoSlot)
// waits for the next Poll; any other failure ends the job's issuing, and
// the parts in flight report it with them.
func (m *Module) issue(j *readJob) error {
	for j.err == nil && j.next < len(j.dst) && j.left < readDepth && len(m.free) > 0 {
		d := j.dst[j.next]
		p := d[:min(len(d), readPart)]
		i := m.free[len(m.free)-1]
		s := &m.sends[i]
		if err := m.e.Read(&s.req, m.addrs[j.src], p, j.rr, j.off); err != nil {
			if !errors.Is(err, ofi.ErrNoSlot) && j.left > 0 {
				j.err, j.next = err, len(j.dst)
			}
			return err
		}
		j.off += uint64(len(p))
		if len(p) == len(d) {
			j.next++
		} else {
			j.dst[j.next] = d[len(p):]
		}
		m.free = m.free[:len(m.free)-1]
		s.job, s.dst = j, j.src
		m.busy = append(m.busy, i)
		m.readParts++
		j.left++
	}
	return nil
}

// readsPoll issues the next parts of the reads in flight and reports
// those with nothing left, after Poll took the completions.
func (m *Module) readsPoll(ev nemesis.NetEvents) {
	for k := 0; k < len(m.reading); {
		j := m.reading[k]
		_ = m.issue(j) // a failure is j.err, reported below
		if j.left > 0 || j.next < len(j.dst) {
			k++
			continue
		}
		m.reading = append(m.reading[:k], m.reading[k+1:]...)
		rd, err := j.rd, j.err
		m.freeJob(j)
		ev.(nemesis.NetEventsReader).ReadDone(rd, err)
	}
}

func (m *Module) newJob(rd *nemesis.NetRead) *readJob {
	var j *readJob
	if n := len(m.jobFree); n > 0 {
		j, m.jobFree = m.jobFree[n-1], m.jobFree[:n-1]
	} else {
		j = new(readJob)
	}
	*j = readJob{rd: rd, dst: j.dst[:0]}
	return j
}

func (m *Module) freeJob(j *readJob) {
	clear(j.dst[:cap(j.dst)]) // drop the receive's buffers
	*j = readJob{dst: j.dst[:0]}
	m.jobFree = append(m.jobFree, j)
}

// readDone counts one of job j's parts as complete with err: a failure
// stops the issuing of the rest (readsPoll reports the job).
func (m *Module) readDone(j *readJob, err error) {
	j.left--
	if err != nil && j.err == nil {
		j.err, j.next = err, len(j.dst)
	}
}

var _ nemesis.NetReader = (*Module)(nil)
