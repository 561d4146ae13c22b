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
// own buffer, one read per entry of its receive list, drawing on the send
// slots. Regions and read jobs are pooled: a steady stream of long
// messages registers and reads without allocating.

// readJob is the reads of one receive: reported once the last completes.
type readJob struct {
	rd   *nemesis.NetRead
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

// Read implements nemesis.NetReader: one fi_read per non-empty entry of
// dst, all issued or none.
func (m *Module) Read(rd *nemesis.NetRead, src int, h []byte, dst [][]byte) (bool, error) {
	if len(h) != ofi.RemoteRegionSize {
		return false, fmt.Errorf("ofinet: rank %d's rendezvous names a %d-byte handle, want %d", src, len(h), ofi.RemoteRegionSize)
	}
	entries := 0
	for _, d := range dst {
		if len(d) > 0 {
			entries++
		}
	}
	if entries > len(m.free) {
		return false, nil
	}
	rr := ofi.GetRemoteRegion(h)
	j := m.newJob(rd)
	var off uint64
	for _, d := range dst {
		if len(d) == 0 {
			continue
		}
		i := m.free[len(m.free)-1]
		s := &m.sends[i]
		if err := m.e.Read(&s.req, m.addrs[src], d, rr, off); err != nil {
			if j.left == 0 {
				m.jobFree = append(m.jobFree, j)
				if errors.Is(err, ofi.ErrNoSlot) {
					return false, nil
				}
				return false, err
			}
			j.err = err // the reads issued report it with them
			break
		}
		off += uint64(len(d))
		m.free = m.free[:len(m.free)-1]
		s.job, s.dst = j, src
		m.busy = append(m.busy, i)
		j.left++
	}
	return true, nil
}

func (m *Module) newJob(rd *nemesis.NetRead) *readJob {
	var j *readJob
	if n := len(m.jobFree); n > 0 {
		j, m.jobFree = m.jobFree[n-1], m.jobFree[:n-1]
	} else {
		j = new(readJob)
	}
	*j = readJob{rd: rd}
	return j
}

// readDone counts one of job j's reads as complete with err; the last
// reports the job.
func (m *Module) readDone(ev nemesis.NetEvents, j *readJob, err error) {
	if err != nil && j.err == nil {
		j.err = err
	}
	if j.left--; j.left > 0 {
		return
	}
	rd, err := j.rd, j.err
	*j = readJob{}
	m.jobFree = append(m.jobFree, j)
	ev.(nemesis.NetEventsReader).ReadDone(rd, err)
}

var _ nemesis.NetReader = (*Module)(nil)
