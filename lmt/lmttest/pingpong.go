package lmttest

import (
	"bytes"
	"fmt"

	"github.com/knemesis/knemesis/nemesis"
)

// PingPong is a round trip of n-byte messages between an endpoint's rank
// and a peer, the lower rank sending first, with every arrival checked:
// the turn tests hand to testing.AllocsPerRun to show that a message
// allocates nothing. Its buffers and requests are made once, up front.
type PingPong struct {
	ep             *nemesis.Endpoint
	wait           func(*nemesis.Request) error
	peer           int
	out, in, want  []byte
	outv, inv      [][]byte // out and in cut into lists, for Lists
	Sent, Received nemesis.Request
	// Lists makes Turn send and receive with Isendv and Irecvv, each
	// buffer cut differently into a list with zero-length entries.
	Lists bool
	// Err is the first failure; once set, Turn does nothing.
	Err error
}

// NewPingPong prepares round trips with peer; wait completes a request
// (an LMT's Wait).
func NewPingPong(ep *nemesis.Endpoint, wait func(*nemesis.Request) error, peer, n int) *PingPong {
	pp := &PingPong{ep: ep, wait: wait, peer: peer,
		out: Message(n, ep.Rank()), in: make([]byte, n), want: Message(n, peer)}
	a := min(4097, n)
	b := max(n-3, a)
	pp.outv = [][]byte{nil, pp.out[:a], pp.out[a:a], pp.out[a:b], {}, pp.out[b:]}
	c := min(1, n)
	d := max(n/2, c)
	pp.inv = [][]byte{pp.in[:c], nil, pp.in[c:d], pp.in[d:], nil}
	return pp
}

// Turn sends and receives one message each, in the order of the ranks.
func (pp *PingPong) Turn() {
	first := pp.ep.Rank() < pp.peer
	for k := range 2 {
		if pp.Err != nil {
			return
		}
		if (k == 0) == first {
			if pp.Lists {
				pp.Err = pp.ep.Isendv(&pp.Sent, pp.peer, 0, pp.outv)
			} else {
				pp.Err = pp.ep.Isend(&pp.Sent, pp.peer, 0, pp.out)
			}
			if pp.Err == nil {
				pp.Err = pp.wait(&pp.Sent)
			}
			continue
		}
		clear(pp.in)
		if pp.Lists {
			pp.Err = pp.ep.Irecvv(&pp.Received, pp.peer, 0, pp.inv)
		} else {
			pp.Err = pp.ep.Irecv(&pp.Received, pp.peer, 0, pp.in)
		}
		if pp.Err == nil {
			pp.Err = pp.wait(&pp.Received)
		}
		if pp.Err == nil && !bytes.Equal(pp.in, pp.want) {
			pp.Err = fmt.Errorf("rank %d received a corrupted message from rank %d", pp.ep.Rank(), pp.peer)
		}
	}
}
