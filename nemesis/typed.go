package nemesis

// Typed sends and receives: the message is the packed stream of a derived
// datatype over a base buffer (package datatype), walked block by block
// with a cursor on the way into and out of the fastbox or cells, and
// handed whole, as the description, to an LMT that takes datatypes.

import (
	"fmt"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/internal/memcopy"
)

// LMTDatatypes is implemented by an LMT that moves messages described by
// a datatype (package attach does, through lmt.Engine's StartSendType and
// StartRecvType, which stage the small blocks and move the large ones in
// place). Datatypes reports whether it does. For a typed request
// (IsendType, IrecvType), Request.Type is the description, Request.Buf
// its base buffer and Request.Iov nil: StartSend and StartRecv must move
// the type's blocks, not an iovec list.
//
// An endpoint hands a typed send to its LMT only when the LMT takes
// datatypes; otherwise, or when the LMT's StartSend refuses it, the
// message goes through the cells whatever its length. A typed receive
// matching an RTS with an LMT that does not take datatypes completes with
// ErrNotSupported (set the same LMT on every rank, as SetLMT asks); with
// attach's, it receives from any sender, whatever its description's
// length (lmt.Datatyped says how).
type LMTDatatypes interface {
	Datatypes() bool
}

// IsendType starts sending the message that typ describes over base: its
// blocks' bytes end to end (typ's packed stream), typ.Size() bytes. The
// receiver cannot tell it from an Isend of the packed bytes, and may use
// a type, a buffer or a list of its own. Neither base nor typ may change
// until r completes.
//
// A message that fits eagerly is gathered block by block straight into
// the fastbox or cells, with no packing buffer; a longer one goes to the
// LMT as the description when the LMT takes datatypes (LMTDatatypes).
// Starting allocates nothing. A nil typ, or one whose blocks reach past
// base, is refused at once with an error wrapping ErrInvalidArg (and, for
// the buffer, the *datatype.FieldError naming the extent).
func (ep *Endpoint) IsendType(r *Request, dst, tag int, base []byte, typ *datatype.Type) error {
	if err := ep.validate(r, dst, tag, false); err != nil {
		return err
	}
	if err := ep.checkTyped("IsendType", dst, base, typ); err != nil {
		return err
	}
	r.start(ep, opSend, dst, tag)
	r.vec, r.typ, r.buf[0], r.msgLen = true, typ, base, int(typ.Size())
	r.cells = r.msgLen > ep.chooseAbove && !ep.rtsHolds(typ)
	ep.startSend(r)
	return nil
}

// IrecvType starts receiving into the blocks that typ describes over
// base a message from src (or AnySource) with tag (or AnyTag): the
// message's bytes fill the blocks in order, typ.Size() of them at most,
// whatever the sender used. A longer message fills every block and
// completes r with ErrTruncated; a shorter one fills the first blocks.
// Nothing outside the blocks is written. Arguments are checked as
// IsendType checks them.
func (ep *Endpoint) IrecvType(r *Request, src, tag int, base []byte, typ *datatype.Type) error {
	if err := ep.validate(r, src, tag, true); err != nil {
		return err
	}
	if err := ep.checkTyped("IrecvType", src, base, typ); err != nil {
		return err
	}
	r.start(ep, opRecv, src, tag)
	r.vec, r.typ, r.buf[0], r.room = true, typ, base, int(typ.Size())
	return ep.startRecv(r)
}

// SendType sends the message typ describes over base (see IsendType) to
// dst and returns once base may be reused.
func (ep *Endpoint) SendType(dst, tag int, base []byte, typ *datatype.Type) error {
	r := &ep.blocker
	if err := ep.IsendType(r, dst, tag, base, typ); err != nil {
		return err
	}
	return ep.Wait(r)
}

// RecvType receives into the blocks typ describes over base (see
// IrecvType) a message from src with tag (wildcards allowed).
func (ep *Endpoint) RecvType(src, tag int, base []byte, typ *datatype.Type) (Status, error) {
	r := &ep.blocker
	if err := ep.IrecvType(r, src, tag, base, typ); err != nil {
		return Status{}, err
	}
	err := ep.Wait(r)
	return r.Status(), err
}

// checkTyped refuses a missing description, one that does not fit its
// base buffer, and a typed message to or from a rank of another node or
// any source on a job that spans nodes (the network path moves buffers
// and lists, not descriptions).
func (ep *Endpoint) checkTyped(op string, peer int, base []byte, typ *datatype.Type) error {
	if typ == nil {
		return errorf(ErrInvalidArg, "%s: nil datatype: describe the message with datatype.Contiguous, Vector or Indexed", op)
	}
	if err := typ.Fits(base); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidArg, op, err)
	}
	if ep.net != nil && (peer == AnySource || ep.peers[peer].net) {
		return errorf(ErrNotSupported, "%s with rank %d: typed messages go between ranks of one node; pack the message, or send its blocks as a list (Isendv)", op, peer)
	}
	return nil
}

// lmtTakes reports whether send r may go by rendezvous: any untyped
// send, and a typed one when the LMT takes datatypes, its description
// fits an RTS (rtsHolds) and the LMT has not refused it (no backend to
// the peer moves descriptions: CMA refused). The cells carry the others,
// which always works.
func (ep *Endpoint) lmtTakes(r *Request) bool {
	return r.typ == nil || ep.lmtTypes && !r.cells
}

// typedRTSRoom is what an LMT's RTS takes in a cell beside a
// description's encoding, with room to spare: lmt's packet header and
// typed handle header take 72 bytes.
const typedRTSRoom = 256

// rtsHolds reports whether typ's encoding fits an RTS in a cell. A pull
// backend (cma) needs it there; without that room the LMT would choose a
// push one (cma-write), whose receiver names its own description in its
// CTS, or falls back to a stream backend when that one is as long: an
// indexed type of thousands of blocks goes by the cells instead, which
// need neither, and whose two copies are what the stream backend's
// would be.
func (ep *Endpoint) rtsHolds(typ *datatype.Type) bool {
	return typ.EncodedLen() <= ep.seg.payloadSize-typedRTSRoom
}

// Type returns the description of a request started by IsendType or
// IrecvType, whose base buffer is Buf(); nil for the other calls.
func (r *Request) Type() *datatype.Type { return r.typ }

// walkType copies between p and the blocks of r's type from byte pos of
// its packed stream: into the blocks when in is set, out of them
// otherwise, until p or the stream runs out. It returns the bytes copied.
// The cursor is found again at every piece (O(log blocks) for an indexed
// type, O(1) otherwise), so a request carries no cursor.
func (r *Request) walkType(pos int, p []byte, in bool) int {
	c := r.typ.Cursor()
	if c.SetPos(int64(min(pos, int(r.typ.Size())))) != nil {
		return 0 // pos is clamped to the stream: cannot happen
	}
	base, done := r.buf[0], 0
	for done < len(p) {
		off, n := c.Next(int64(len(p) - done))
		if n == 0 {
			break
		}
		if in {
			done += memcopy.Copy(base[off:off+n], p[done:done+int(n)])
		} else {
			done += memcopy.Copy(p[done:done+int(n)], base[off:off+n])
		}
	}
	return done
}

// rtsFitsFbox reports whether the RTS of send r certainly fits a fastbox
// of fboxRTSMin bytes: a single buffer, a list of at most fboxRTSEntries
// entries, or a description whose encoding is no longer than such a
// list's handle entries (8 bytes a segment: half their size, for the
// typed handle's longer header).
func (r *Request) rtsFitsFbox() bool {
	switch {
	case !r.vec:
		return true
	case r.typ != nil:
		return r.typ.EncodedLen() <= fboxRTSEntries*8
	}
	return len(r.iov) <= fboxRTSEntries
}
