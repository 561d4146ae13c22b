// Package vmsplice registers the "vmsplice" LMT backend (seed 003, §3.1):
// the sender attaches its pages to a pipe with vmsplice(2), the receiver
// readv()s them into its buffer — a single copy, made by the receiver.
//
// Import it for its side effect:
//
//	import _ "github.com/knemesis/knemesis/vmsplice"
//
// Without SPLICE_F_GIFT the pipe only references the sender's pages: were the
// sender to write its buffer before the receiver has read it, the receiver
// would see the new bytes. The LMT protocol therefore completes a send only on
// the receiver's DONE, sent once every byte is out of the pipe.
//
// The pipe is sized as for package pipe: the larger the pipe, the more pages
// one vmsplice call attaches and the fewer round trips through the poll loop.
package vmsplice

import (
	"github.com/knemesis/knemesis/internal/fifo"
	"github.com/knemesis/knemesis/lmt"
)

// Name is the backend's name in lmt.Config.Prefer and lmt.Check.
const Name = "vmsplice"

func init() {
	lmt.Register(5, Name, lmt.Stream, fifo.NewBackend(Name, true), func(cfg *lmt.Config, peer lmt.Peer) error {
		return fifo.Check(Name, true, cfg, peer)
	})
}
