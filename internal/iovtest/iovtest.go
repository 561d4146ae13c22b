// Package iovtest moves one message between the two ranks of a Nemesis job
// with iovec lists or single buffers on either side, and checks on the
// receiver what arrived: the content, every guard byte around every entry,
// the status and the exact error. The endpoint's tests and attach's
// share it, so that the eager path and every LMT backend meet the same
// cases.
package iovtest

import (
	"errors"
	"fmt"

	"github.com/knemesis/knemesis/lmt/lmttest"
	"github.com/knemesis/knemesis/nemesis"
)

// RecvSplits cuts n bytes otherwise than lmttest's lists (the senders'), so
// that entry boundaries on the two sides never line up: zero-length entries
// first, between and last, a 1-byte entry, one longer than a page, and the
// rest in three uneven pieces.
func RecvSplits(n int) []int {
	var out []int
	for _, l := range []int{0, 0, 3, 1, 0, 8190, 0} {
		l = min(l, n)
		out = append(out, l)
		n -= l
	}
	return append(out, n/3, n/3+n%3, 0, n/3, 0)
}

// Shape says how each side of one message holds its bytes.
type Shape struct {
	SendVec, RecvVec bool
	Late             bool // the receive is posted after the message (or its RTS) arrived
	Short            int  // the receive holds this many bytes fewer than the message
}

func (s Shape) String() string {
	side := func(vec bool) string {
		if vec {
			return "list"
		}
		return "buffer"
	}
	str := side(s.SendVec) + "→" + side(s.RecvVec)
	if s.Late {
		str += ", late receive"
	}
	if s.Short > 0 {
		str += fmt.Sprintf(", %d bytes short", s.Short)
	}
	return str
}

// Shapes are the cases every size goes through: lists on both sides, on
// one side only, receives posted first and late, and truncation that cuts
// the message across entry boundaries of the receive list.
var Shapes = []Shape{
	{SendVec: true, RecvVec: true},
	{SendVec: true, RecvVec: true, Late: true},
	{SendVec: true},
	{RecvVec: true},
	{RecvVec: true, Late: true},
	{SendVec: true, RecvVec: true, Short: 4101},
	{SendVec: true, RecvVec: true, Short: 1, Late: true},
}

// goTag is the tag of the receiver's "posted" token.
const goTag = nemesis.MaxTag - 2

// Exchange moves one message of n bytes with tag from rank 0 to rank 1 of
// ep's job, shaped as s, and returns on each rank its request, completed,
// and buffer. Rank 0 sends with Isendv or Isend; rank 1 checks everything
// it received and returns an error saying what was wrong. A receive posted
// first is posted before rank 0 starts sending (rank 1 sends a token); a
// late one after the message, or its first cell or RTS, arrived (rank 1
// probes).
func Exchange(ep *nemesis.Endpoint, n, tag int, s Shape) (*nemesis.Request, *lmttest.Buffer, error) {
	r := new(nemesis.Request)
	if ep.Rank() == 0 {
		b := lmttest.NewBuffer(n, 1, s.SendVec)
		b.FillMessage()
		if !s.Late {
			if _, err := ep.Recv(1, goTag, nil); err != nil {
				return nil, nil, err
			}
		}
		var err error
		if s.SendVec {
			err = ep.Isendv(r, 1, tag, b.Iov)
		} else {
			err = ep.Isend(r, 1, tag, b.Iov[0])
		}
		if err != nil {
			return nil, nil, err
		}
		if err := ep.Wait(r); err != nil {
			return nil, nil, fmt.Errorf("%d bytes, %v: send: %w", n, s, err)
		}
		return r, b, nil
	}
	room := max(n-s.Short, 0)
	var b *lmttest.Buffer
	if s.RecvVec {
		b = lmttest.NewSplitBuffer(3, RecvSplits(room))
	} else {
		b = lmttest.NewBuffer(room, 3, false)
	}
	post := func() error {
		if s.RecvVec {
			return ep.Irecvv(r, 0, tag, b.Iov)
		}
		return ep.Irecv(r, 0, tag, b.Iov[0])
	}
	if s.Late {
		if st, err := ep.Probe(0, tag); err != nil || st.Len != n {
			return nil, nil, fmt.Errorf("%d bytes, %v: probe: %+v, %v", n, s, st, err)
		}
		if err := post(); err != nil {
			return nil, nil, err
		}
	} else {
		if err := post(); err != nil {
			return nil, nil, err
		}
		if err := ep.Send(0, goTag, nil); err != nil {
			return nil, nil, err
		}
	}
	err := ep.Wait(r)
	if n > room {
		want := fmt.Sprintf("%v: message of %d bytes, receive buffer of %d", nemesis.ErrTruncated, n, room)
		if !errors.Is(err, nemesis.ErrTruncated) || err.Error() != want {
			return nil, nil, fmt.Errorf("%d bytes, %v: error %v, want %q", n, s, err, want)
		}
	} else if err != nil {
		return nil, nil, fmt.Errorf("%d bytes, %v: %w", n, s, err)
	}
	if st := r.Status(); st != (nemesis.Status{Source: 0, Tag: tag, Len: n, Count: room}) {
		return nil, nil, fmt.Errorf("%d bytes, %v: status %+v, want %d of %d bytes", n, s, st, room, n)
	}
	if err := b.Verify(room); err != nil {
		return nil, nil, fmt.Errorf("%d bytes, %v: %w", n, s, err)
	}
	return r, b, nil
}
