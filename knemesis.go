// Package knemesis joins a process to a job with everything wired: a
// Nemesis endpoint for small messages (package nemesis), the LMT engine for
// large ones with every backend this build registers (lmt.Backends; each
// one's identity in lmt.Identities), and the automatic choice of backend
// per peer and size (package auto). It is the entry point for the common
// case.
//
// # Where job, rank and size come from
//
// A job is N processes; each must know the job's name, its rank and N.
// launch.Run starts N copies of the running binary and tells each through
// its environment, where launch.Self reads them; a process started so
// joins with JoinProc. Under mpirun or srun, PMIx tells them instead
// (netmod/ofinet.Join, build tags ofi and pmix). Join takes the three
// values from anywhere else:
//
//	func main() {
//		if p, ok := launch.Self(); ok { // a child: rank p.Rank of p.Size
//			ep, err := knemesis.JoinProc(p, nil)
//			…
//			defer ep.Close()
//			err = ep.Send(peer, tag, buf) // any size
//			return
//		}
//		err := launch.Run(ctx, launch.Options{Procs: 4}) // the parent
//	}
//
// examples/ holds whole programs: hello, a ring, a 2-D halo exchange, an
// allreduce of a gradient, an RMA producer and consumer, a job of two
// nodes under mpirun.
//
// # Calls
//
// The Endpoint's methods are nemesis.Endpoint's: Send and Recv, Isend and
// Irecv on caller-owned Requests with Test and Wait, WaitAll, WaitAny and
// TestSome on a slice of them, Sendrecv, Probe and Iprobe, Improbe or
// Mprobe then Mrecv (a matched probe: the message is taken out of
// matching), Cancel of a receive. They move []byte; the generic functions
// of this package (Send, Recv, Isend, Irecv, Sendrecv, Mrecv, Imrecv) move
// a slice of any fixed-size number type (coll.Number) as its memory, and
// Count turns a Status's bytes into elements. coll gives communicators and
// the collectives over the same types, rma one-sided windows; both take
// the *Endpoint that Join returns.
//
// The layers stay open beneath it for those who choose for themselves:
// nemesis.Join and attach.Attach with a preference list of their own, or
// lmt.New with a control channel of their own.
package knemesis

import (
	"errors"

	"github.com/knemesis/knemesis/auto"
	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// Options tune Join. The zero value (or nil) is the default endpoint with
// the automatic choice.
type Options struct {
	// Nemesis is passed to nemesis.Join.
	Nemesis *nemesis.Options
	// Auto is passed to auto.Attach.
	Auto auto.Options
}

// Endpoint is a Nemesis endpoint whose messages above the eager limit go
// through the LMT, each by the backend the selection chose for its peer
// and size. Its Send, Recv and Wait are the nemesis.Endpoint's.
type Endpoint struct {
	*nemesis.Endpoint
	// Selection says what was chosen for each peer and why.
	Selection *auto.Selection
}

// Join joins rank of the job of size ranks and attaches the LMT with the
// automatic choice of backends. Every rank of the job must call it (or
// attach an LMT of its own) before sending its first large message.
func Join(job string, rank, size int, o *Options) (*Endpoint, error) {
	if o == nil {
		o = &Options{}
	}
	ep, err := nemesis.Join(job, rank, size, o.Nemesis)
	if err != nil {
		return nil, err
	}
	sel, err := auto.Attach(ep, o.Auto)
	if err != nil {
		return nil, errors.Join(err, ep.Close())
	}
	return &Endpoint{Endpoint: ep, Selection: sel}, nil
}

// JoinProc is Join for a process started by launch.Run.
func JoinProc(p launch.Proc, o *Options) (*Endpoint, error) {
	return Join(p.Job, p.Rank, p.Size, o)
}

// Close detaches the LMT, once the sends that completed with their bytes
// in a buffered channel have been taken, and leaves the job.
func (e *Endpoint) Close() error {
	return errors.Join(e.Selection.Close(), e.Endpoint.Close())
}
