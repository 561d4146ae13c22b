package lmt

import "github.com/knemesis/knemesis/lmt/internal/knobs"

// capability is one thing a backend asks of the Engine's protocol beyond
// its Flow: declared by its identity (Remote) or by an optional interface
// it implements and answers true to, asserted once when the Engine makes
// its slot, never per message. A slot carries the set of them.
type capability uint8

const (
	// capRemote: it reaches ranks on other nodes only (Identity.Remote).
	capRemote capability = 1 << iota
	// capBuffered: a Stream sender completes once its bytes are in the
	// channel ([Buffered]).
	capBuffered
	// capOrdered: the Stream channel is a plain FIFO, and its receiver
	// grants ahead ([Ordered], channel.turns).
	capOrdered
	// capWeighed: a Split backend whose cut follows the rails' measured
	// speeds ([Weighed]).
	capWeighed
	// capDatatypes: it carries transfers described by a datatype
	// ([Datatyped]).
	capDatatypes
	// capReceivesTyped: a typed receive may take its messages
	// (Datatyped, or a Pull [TypedReceiver]).
	capReceivesTyped
	// capStages: its typed transfers pack their small blocks into a
	// staging buffer (a Datatyped backend that is no [Walker]).
	capStages
)

func (c capability) has(x capability) bool { return c&x != 0 }

// capabilities asserts b's optional interfaces once, with its identity's
// flow, unless a knob turns the scheduling off. early: the Engine uses it
// as an [Early] stream, whose channel fills ahead its own way and so
// does not grant ahead.
func capabilities(r registration, b Backend, early bool, k knobs.Knobs) capability {
	var c capability
	if r.Remote {
		c |= capRemote
	}
	if buf, ok := b.(Buffered); ok && r.Flow == Stream && buf.Buffered() && !k.NoBuffered {
		c |= capBuffered
	}
	if ord, ok := b.(Ordered); ok && r.Flow == Stream && !early && ord.Ordered() && !k.NoGrantAhead {
		c |= capOrdered
	}
	if w, ok := b.(Weighed); ok && r.Flow == Split && w.Weighed() {
		c |= capWeighed
	}
	if d, ok := b.(Datatyped); ok && d.Datatypes() {
		c |= capDatatypes | capReceivesTyped
		if w, ok := b.(Walker); !ok || !w.Walks() {
			c |= capStages
		}
	}
	if tr, ok := b.(TypedReceiver); ok && r.Flow == Pull && tr.ReceivesTyped() {
		c |= capReceivesTyped
	}
	return c
}
