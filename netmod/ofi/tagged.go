//go:build ofi

package ofi

// #include "shim.h"
import "C"

import "unsafe"

// Isend starts sending a tagged message to peer: hdr (exactly
// Config.HeaderSize bytes, copied now) then the entries of data end to end
// (at most MaxPayloadIov non-empty ones, which must stay untouched until r
// completes). Completion means the buffers may be reused, not that the
// peer has received the message.
func (e *Endpoint) Isend(r *Request, peer Addr, tag uint64, hdr []byte, data [][]byte) error {
	if peer == AnyAddr {
		return errorf(ErrInvalidArg, "a send needs a peer, not AnyAddr")
	}
	if err := e.checkMsg(len(hdr), data); err != nil {
		return err
	}
	i, cs, err := e.take(r, opSend, peer)
	if err != nil {
		return err
	}
	first := e.setHdr(cs)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&cs.hdr[0])), len(hdr)), hdr)
	e.setIov(&e.slots[i], cs, first, data)
	e.slots[i].tag = tag
	return e.post(i)
}

// Irecv posts a receive for a message from peer (or AnyAddr) whose tag
// matches tag in the bits ignore leaves clear. The header lands in r.Hdr,
// the payload in the entries of data (at most MaxPayloadIov non-empty
// ones), which must stay untouched until r completes.
func (e *Endpoint) Irecv(r *Request, peer Addr, tag, ignore uint64, data [][]byte) error {
	if err := e.checkMsg(e.cfg.HeaderSize, data); err != nil {
		return err
	}
	i, cs, err := e.take(r, opRecv, peer)
	if err != nil {
		return err
	}
	e.setIov(&e.slots[i], cs, e.setHdr(cs), data)
	e.slots[i].tag, e.slots[i].ignore = tag, ignore
	return e.post(i)
}

func (e *Endpoint) checkMsg(hdrLen int, data [][]byte) error {
	if hdrLen != e.cfg.HeaderSize {
		return errorf(ErrInvalidArg, "header of %d bytes, this endpoint's messages carry %d (Config.HeaderSize)", hdrLen, e.cfg.HeaderSize)
	}
	n := 0
	for _, b := range data {
		if len(b) > 0 {
			n++
		}
	}
	if n > e.payIov {
		return errorf(ErrInvalidArg, "%d non-empty payload entries, provider %s takes %d (MaxPayloadIov)", n, e.provider, e.payIov)
	}
	return nil
}

// setHdr points the slot's first iovec entry at its header area, when
// messages have a header, and returns the next free entry.
func (e *Endpoint) setHdr(cs *C.struct_kn_slot) int {
	if e.cfg.HeaderSize == 0 {
		return 0
	}
	setIovec(cs, 0, unsafe.Pointer(&cs.hdr[0]), e.cfg.HeaderSize)
	return 1
}
