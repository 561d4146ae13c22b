package engine

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/lmt/attach"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/threshold"
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
	case "knem":
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
	opts := attach.Options{EagerMax: 1, Prefer: []string{name}}
	selecting := name == "auto" || name == "table"
	if selecting {
		opts = attach.Options{EagerMax: 1}
	}
	if name == "auto" {
		m.slots = make([]selectorSlot, p.Proc.Size)
		opts.Select = func(peer int) attach.Selector { return &m.slots[peer] }
	}
	if m.att, err = attach.Attach(ep, opts); err != nil {
		ep.Close()
		return nil, fmt.Errorf("%s: attaching the LMT: %w", name, err)
	}
	if !selecting {
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
	if err := m.autoTable(p.CPUs); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

type multiEngine struct {
	ep     *nemesis.Endpoint
	att    *attach.LMT
	me, n  int
	choose func(size int) string
	slots  []selectorSlot // auto: one adaptive selector per peer
	reqs   []nemesis.Request
}

// autoTable builds the selector's table for a collective: every rank has
// n-1 transfers in flight, which lowers DMA_min (§4.4).
func (m *multiEngine) autoTable(cpus []int) error {
	if len(cpus) != m.n {
		cpus = make([]int, m.n)
		for i := range cpus {
			cpus[i] = i
		}
	}
	env := threshold.Env{
		Placement: threshold.Placement{Sender: cpus[m.me], Receiver: cpus[(m.me+1)%m.n], JobCPUs: cpus, Concurrent: m.n - 1},
		Knem:      knemDevice() == nil && lmtRegistered("knem") == nil,
	}
	for _, b := range threshold.Backends {
		if b != threshold.Knem && m.att.Engine().Check(string(b), (m.me+1)%m.n) != nil {
			env.Unavailable = append(env.Unavailable, b)
		}
	}
	info, err := threshold.Load(threshold.Config{Env: env})
	if err != nil {
		return fmt.Errorf("auto: the selector: %w", err)
	}
	table := info.Table
	if err := m.ep.SetLMT(m.att, max(int(table.LMTMin.Bytes)-1, 0)); err != nil {
		return fmt.Errorf("auto: eager limit: %w", err)
	}
	if m.slots != nil {
		cands := candidates(env)
		for r := range m.slots {
			if r == m.me {
				continue
			}
			if m.slots[r].a, err = threshold.NewAdaptive(table, cands); err != nil {
				return fmt.Errorf("auto: %w", err)
			}
		}
		return nil
	}
	m.choose = func(size int) string {
		if c := table.Choose(int64(size)); !c.Eager {
			return string(c.Backend)
		}
		return ""
	}
	return nil
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
		var err error
		if m.choose != nil {
			err = m.att.Isend(&m.reqs[k], r, tag, send[r], m.choose(len(send[r])))
		} else {
			err = m.ep.Isend(&m.reqs[k], r, tag, send[r])
		}
		if err != nil {
			return err
		}
		k++
	}
	var errs error
	for i := range k {
		if m.att != nil {
			errs = errors.Join(errs, m.att.Wait(&m.reqs[i]))
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
