package rma

import (
	"fmt"

	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/lmt"
)

// An exposed window reaches a target by KnemAttach when the module can map
// the target's persistent region into this process (region attach, a
// knemesis extension that GET_INFO announces with feature bit 1). The
// mapping is made once, when the window is created, and kept until Free:
// it is the registration cache of the window, so that a put or a get is a
// plain memcpy with no system call and no page walk, and an atomic is a
// CPU atomic on the target's own pages, atomic with respect to the
// target's and to every other rank's. The mapping keeps the target's
// pages pinned while it lasts, even past the target's exit, so it never
// points to freed memory; a dead target is found, as on an allocated
// window, by Flush.
//
// Attach pays whenever the window outlives a few operations toward the
// target, which a window's creation cost implies anyway: it is preferred
// to Knem's INLINE_COPY by default, and Knem remains where the module
// lacks the feature or the attach fails (its reason in Route.Refused).

// attach maps target t's region for loads and stores, or says in the
// LMT's terms why it cannot.
func (w *Window) attach(t int) error {
	if err := w.knemUsable(t); err != nil {
		return err
	}
	if f := w.e.knemFeatures; f&knem.FeatureAttach == 0 {
		return &lmt.Unavailable{Backend: lmt.Knem, Peer: t,
			Reason: fmt.Sprintf("the knem module here lacks region attach (GET_INFO features %#x, without bit 1)", uint32(f)),
			Fix:    "load the knem module of knemesis, which maps regions (KNEM_FEATURE_ATTACH)"}
	}
	if w.sizes[t] == 0 {
		w.parts[t] = []byte{} // nothing to map: every operation is empty
		return nil
	}
	a, err := w.e.knem.Attach(w.peers[t].cookie, knem.ProtRead|knem.ProtWrite)
	if err != nil {
		return &lmt.Unavailable{Backend: lmt.Knem, Peer: t,
			Reason: fmt.Sprintf("attaching rank %d's region %#x: %v", t, uint64(w.peers[t].cookie), err),
			Fix:    "run every rank as the same user, with the knem module of knemesis", Err: err}
	}
	if got := len(a.Bytes()); got != w.sizes[t] {
		_ = a.Close()
		return &lmt.Unavailable{Backend: lmt.Knem, Peer: t,
			Reason: fmt.Sprintf("rank %d's region maps %d bytes, its window part is %d", t, got, w.sizes[t]),
			Fix:    "none needed: the target is reached by the next mechanism"}
	}
	w.attached[t] = a
	w.parts[t] = a.Bytes()
	return nil
}

// detachAll unmaps every target's region, which unpins its pages once no
// copy holds them.
func (w *Window) detachAll() {
	for t, a := range w.attached {
		if a != nil {
			_ = a.Close()
			w.attached[t] = nil
		}
	}
}
