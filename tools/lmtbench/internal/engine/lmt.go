package engine

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/attach"
	_ "github.com/knemesis/knemesis/kmod/knem/knemlmt" // registers the knem backend
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis"
	_ "github.com/knemesis/knemesis/pipe"     // registers the pipe backend
	_ "github.com/knemesis/knemesis/vmsplice" // registers the vmsplice backend
)

// The toolkit's backends are measured the way an application uses them: a
// Nemesis endpoint per rank with the LMT engine attached (attach), and
// Endpoint.Send and Recv. The rendezvous (RTS, CTS, DONE) travels through
// the Nemesis queues, the payload through the backend, so a number here
// includes everything a real message pays.
//
// A forced backend gets an eager limit of one byte, so that every message
// the benchmark sends, however small, goes through that backend: the sweep
// then shows where each backend stops paying for its rendezvous.
//
// Every backend of lmt.Identities is listed, in their order (by copies
// made), whether or not it can run here, so that `lmtbench info` and
// --backends name it with the reason it cannot: on a host that cannot load
// modules, knem's /dev/knem is missing.
func init() {
	for _, id := range lmt.Identities() {
		if id.Name == lmt.Arena || id.Name == lmt.ArenaCopy {
			continue // needs a job with an arena: arena.go
		}
		if id.Remote {
			continue // ranks on other nodes only: lmtbench pingpong under mpirun (cli/job_ofi.go)
		}
		check := func() error { return lmtRegistered(id.Name) }
		if id.Name == lmt.Knem {
			check = func() error {
				if err := knemDevice(); err != nil {
					return err
				}
				return lmtRegistered(id.Name)
			}
		}
		register(Backend{
			Name:        id.Name,
			Summary:     "LMT: " + id.Summary,
			Check:       check,
			SharedBytes: func(int) int { return 0 },
			Open:        func(p Peer) (Engine, error) { return openLMT(p, id.Name) },
		})
	}
}

// lmtNames lists the LMT backends' names in the order of lmt.Identities.
func lmtNames() []string {
	var names []string
	for _, id := range lmt.Identities() {
		names = append(names, id.Name)
	}
	return names
}

func init() {
	register(Backend{
		Name:        "eager",
		Summary:     "Nemesis cells and fastboxes only, no LMT: the small-message path (two user copies)",
		OnRequest:   true, // latency and tune run it; the LMT sweep need not
		Check:       func() error { return nil },
		SharedBytes: func(int) int { return 0 },
		Open:        openEager,
	})
}

// openEager joins the Nemesis job without an LMT: every message, however
// long, goes through the cells (and a fastbox when it fits).
func openEager(p Peer) (Engine, error) {
	if p.Proc.Size != 2 {
		return nil, fmt.Errorf("eager: runs between exactly 2 processes, job has %d", p.Proc.Size)
	}
	ep, err := nemesis.JoinProc(p.Proc, nil)
	if err != nil {
		return nil, fmt.Errorf("eager: joining the Nemesis job: %w", err)
	}
	return &lmtEngine{ep: ep, peer: 1 - p.Proc.Rank, alloc: p.Alloc}, nil
}

// lmtRegistered checks the backend is compiled into package lmt; whether
// it works with a given peer is only known inside a job (Open checks).
func lmtRegistered(name string) error {
	for _, n := range lmt.Backends() {
		if n == name {
			return nil
		}
	}
	return &Unavailable{Backend: name, Reason: "package lmt has no such backend in this build"}
}

// tag is the one tag the benchmark uses: messages of one direction match
// in order.
const tag = 7

type lmtEngine struct {
	ep   *nemesis.Endpoint
	att  *attach.LMT
	peer int
	sreq nemesis.Request
	rreq nemesis.Request
	// alloc places SendBuffer's memory (Peer.Alloc); nil is make.
	alloc func(int) ([]byte, error)
}

func openLMT(p Peer, backend string) (Engine, error) {
	if p.Proc.Size != 2 {
		return nil, fmt.Errorf("%s: runs between exactly 2 processes, job has %d", backend, p.Proc.Size)
	}
	ep, err := nemesis.JoinProc(p.Proc, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: joining the Nemesis job: %w", backend, err)
	}
	att, err := attach.Attach(ep, attach.Options{EagerMax: 1, Prefer: []string{backend}})
	if err != nil {
		ep.Close()
		return nil, fmt.Errorf("%s: attaching the LMT: %w", backend, err)
	}
	e := &lmtEngine{ep: ep, att: att, peer: 1 - p.Proc.Rank, alloc: p.Alloc}
	if err := att.Engine().Check(backend, e.peer); err != nil {
		e.Close()
		return nil, unavailable(backend, err)
	}
	return e, nil
}

// unavailable turns the lmt package's refusal into ours, keeping its
// reason and fix.
func unavailable(backend string, err error) error {
	var u *lmt.Unavailable
	if errors.As(err, &u) {
		return &Unavailable{Backend: backend, Reason: u.Reason, Fix: u.Fix}
	}
	return fmt.Errorf("%s: %w", backend, err)
}

func (e *lmtEngine) SendBuffer(n int) ([]byte, error) { return plain(e.alloc, n) }

func (e *lmtEngine) isend(r *nemesis.Request, buf []byte) error {
	return e.ep.Isend(r, e.peer, tag, buf)
}

func (e *lmtEngine) Send(buf []byte) error {
	if err := e.isend(&e.sreq, buf); err != nil {
		return err
	}
	return e.wait(&e.sreq)
}

func (e *lmtEngine) Recv(buf []byte) error {
	if err := e.ep.Irecv(&e.rreq, e.peer, tag, buf); err != nil {
		return err
	}
	if err := e.wait(&e.rreq); err != nil {
		return err
	}
	if st := e.rreq.Status(); st.Len != len(buf) {
		return fmt.Errorf("peer sent %d bytes, receiver expected %d", st.Len, len(buf))
	}
	return nil
}

func (e *lmtEngine) SendRecv(out, in []byte) error {
	if err := e.ep.Irecv(&e.rreq, e.peer, tag, in); err != nil {
		return err
	}
	if err := e.isend(&e.sreq, out); err != nil {
		return err
	}
	if err := e.wait(&e.sreq); err != nil {
		return err
	}
	if err := e.wait(&e.rreq); err != nil {
		return err
	}
	if st := e.rreq.Status(); st.Len != len(in) {
		return fmt.Errorf("peer sent %d bytes, receiver expected %d", st.Len, len(in))
	}
	return nil
}

// wait is the endpoint's Wait, as applications wait: it keeps spinning
// while chunks move and sleeps in poll(2) on an idle pipe of the attached
// LMT (nemesis.LMTPoller).
func (e *lmtEngine) wait(r *nemesis.Request) error { return e.ep.Wait(r) }

// Rails implements RailReporter from the statistics of the last receive.
func (e *lmtEngine) Rails() [lmt.NumRails]int64 {
	st, _ := attach.Stats(&e.rreq)
	return st.Rails
}

func (e *lmtEngine) Close() error {
	var err error
	if e.att != nil {
		err = e.att.Close()
	}
	return errors.Join(err, e.ep.Close())
}
