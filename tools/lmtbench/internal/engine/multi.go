package engine

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/attach"
	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
)

// Multi is an engine between all the ranks of a job, for collectives.
type Multi interface {
	// Alltoall sends send[r] to every other rank r and receives recv[r]
	// from it, all at once; entries for the calling rank are ignored.
	Alltoall(send, recv [][]byte) error
	Close() error
}

// OpenMulti opens backend name between the p.Proc.Size ranks of a job. The
// reference has no N-process form.
func OpenMulti(name string, p Peer) (Multi, error) {
	switch name {
	case "memcpy":
		return nil, fmt.Errorf("memcpy: the reference runs between 2 processes only")
	case lmt.Knem:
		if err := knemDevice(); err != nil {
			return nil, err
		}
	}
	ep, err := nemesis.JoinProc(p.Proc, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: joining the Nemesis job: %w", name, err)
	}
	m := &multiEngine{ep: ep, me: p.Proc.Rank, n: p.Proc.Size, reqs: make([]nemesis.Request, 2*(p.Proc.Size-1))}
	if name == "eager" {
		return m, nil
	}
	if name == "auto" || name == "table" {
		// Every rank has n-1 transfers in flight, which lowers
		// DMA_min (§4.4).
		sel, err := auto.Attach(ep, auto.Options{CPUs: p.CPUs, Concurrent: p.Proc.Size - 1, TableOnly: name == "table"})
		if err != nil {
			ep.Close()
			return nil, err
		}
		m.att = sel.LMT
		return m, nil
	}
	if m.att, err = attach.Attach(ep, attach.Options{EagerMax: 1, Prefer: []string{name}}); err != nil {
		ep.Close()
		return nil, fmt.Errorf("%s: attaching the LMT: %w", name, err)
	}
	for r := range m.n {
		if r == m.me {
			continue
		}
		if err := m.att.Engine().Check(name, r); err != nil {
			m.Close()
			return nil, unavailable(name, err)
		}
	}
	return m, nil
}

type multiEngine struct {
	ep    *nemesis.Endpoint
	att   *attach.LMT
	me, n int
	reqs  []nemesis.Request
}

// Alltoall posts every receive first, then the sends starting with the
// next rank, so that no two ranks start with the same destination.
func (m *multiEngine) Alltoall(send, recv [][]byte) error {
	k := 0
	for r := range m.n {
		if r == m.me {
			continue
		}
		if err := m.ep.Irecv(&m.reqs[k], r, tag, recv[r]); err != nil {
			return err
		}
		k++
	}
	for i := 1; i < m.n; i++ {
		r := (m.me + i) % m.n
		if err := m.ep.Isend(&m.reqs[k], r, tag, send[r]); err != nil {
			return err
		}
		k++
	}
	var errs error
	for i := range k {
		if m.att != nil {
			errs = errors.Join(errs, m.ep.Wait(&m.reqs[i]))
		} else {
			errs = errors.Join(errs, m.ep.Wait(&m.reqs[i]))
		}
	}
	return errs
}

func (m *multiEngine) Close() error {
	var err error
	if m.att != nil {
		err = m.att.Close()
	}
	return errors.Join(err, m.ep.Close())
}
