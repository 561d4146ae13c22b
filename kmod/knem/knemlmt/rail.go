package knemlmt

import (
	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/lmt"
)

// The knem rail of a multirail-knem message (lmt.KnemRail): the backend
// is also the lmt.Offloader of that Split backend. The sender declares its
// whole message as a region, as for a knem message (cached or
// single-use), and offers the cookie in the RTS; the receiver, once its
// CTS has given the rail a piece, has the module copy that piece out of
// the region at its offset with one asynchronous INLINE_COPY, on the
// kernel thread or, where Policy.DMA or DMA_min says so, a DMA channel,
// and polls the status slot between the chunks of its read rail. The
// whole region is declared because the sender learns the cut only from
// the CTS, and a declaration after it would cost the rails a round trip;
// the registration cache takes that pinning off the next messages from
// the same buffers.

var _ lmt.Offloader = (*backend)(nil)

// Offer declares t's buffers and writes the knem handle (cookie, message
// length) into dst; false without the module.
func (b *backend) Offer(t *lmt.Transfer, dst []byte) (bool, error) {
	if b.dev == nil || t.Len() == 0 || len(dst) < handleLen {
		return false, nil
	}
	c, cached, err := b.declare(t)
	if err != nil {
		return false, err
	}
	st := t.Offload()
	st.Key, st.Kept = uint64(c), cached
	putHandle(dst, t, c, cached)
	return true, nil
}

// Accept takes the sender's knem handle, checked as a knem RTS's is.
func (b *backend) Accept(t *lmt.Transfer, offer []byte) error {
	c, cached, err := decodeHandle(t.Peer(), offer, t.MessageLen())
	if err != nil {
		return err
	}
	st := t.Offload()
	st.Key, st.Kept = uint64(c), cached
	return nil
}

// Copy starts the copy of bytes [from, from+n) of the sender's region into
// t's buffers for them: asynchronous, in a status slot, unless all 4096
// slots are busy (then it copies now, and Poll finds it over).
func (b *backend) Copy(t *lmt.Transfer, from, n int64) error {
	b.piece = t.BuffersAt(b.piece[:0], from, from+n)
	slot, pending, err := b.startCopy(t, b.piece, knem.Cookie(t.Offload().Key), from, int(n), true)
	clear(b.piece) // the buffers are the transfer's, not the backend's to keep
	if pending {
		t.Offload().Flight = uint64(slot) + 1
	}
	return err
}

// Poll reads the status slot of the copy Copy started. A closed backend
// has none in flight: closing /dev/knem waits for its copies.
func (b *backend) Poll(t *lmt.Transfer) (bool, error) {
	st := t.Offload()
	if st.Flight == 0 || b.dev == nil {
		return true, nil
	}
	slot := knem.Slot(st.Flight - 1)
	done, err := b.copyStatus(t, slot)
	if !done {
		return false, nil
	}
	b.status.Free(slot)
	b.inflight--
	st.Flight = 0
	return true, err
}

// Withdraw destroys the sender's single-use region unless the receiver's
// copy took it; a cached one stays for the next message.
func (b *backend) Withdraw(t *lmt.Transfer, used bool) {
	st := t.Offload()
	if b.dev == nil || st.Key == 0 || st.Kept || used {
		return
	}
	_ = b.dev.DestroyRegion(knem.Cookie(st.Key))
}
