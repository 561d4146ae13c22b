package rma

import (
	"fmt"
	"unsafe"

	"github.com/knemesis/knemesis/kmod/knem"
	"github.com/knemesis/knemesis/nemesis"
)

// Expose creates, collectively over ep's job, a window whose part in this
// rank is buf, memory the caller already has; buf must stay referenced
// and in place until Free. Each other rank reaches it by the first of
// Options.Prefer that both can use:
//
//   - KnemAttach: the persistent knem region of buf mapped into each
//     other rank once, when /dev/knem is there with region attach;
//   - Knem: the same region reached by one INLINE_COPY per operation
//     (cookie and offset), when /dev/knem is there;
//   - CMA: process_vm_writev/readv on this process's addresses;
//   - AM: active messages this rank executes from its progress loop.
//
// The availability checks are the LMT's; Route tells each target's
// mechanism and why those before it were refused. Atomics are CPU atomics
// on an attached region, else go by active message: the target runs them
// on its own CPU, atomically with respect to its own atomics on the word.
// ep is what the application holds, as for Allocate.
func Expose(ep nemesis.Holder, buf []byte, o *Options) (*Window, error) {
	prefer := o.prefer()
	for _, m := range prefer {
		if m != KnemAttach && m != Knem && m != CMA && m != AM {
			return nil, errorf(ErrInvalidArg, "an exposed window cannot use mechanism %v", m)
		}
	}
	e, err := engineOf(nemesis.EndpointOf(ep))
	if err != nil {
		return nil, err
	}
	w := e.newWindow()
	w.local = buf
	allowCMA()
	var base uintptr
	if len(buf) > 0 {
		base = uintptr(unsafe.Pointer(&buf[0]))
		if (has(prefer, KnemAttach) || has(prefer, Knem)) && e.openKnem() != nil {
			// A region that fails leaves cookie 0: peers then skip knem.
			w.cookie, _ = e.knem.CreateRegion([][]byte{buf}, knem.ProtRead|knem.ProtWrite, 0)
		}
	}
	all := make([][collLen]byte, e.size)
	mine := putUint64s(uint64(len(buf)), uint64(base), uint64(selfPID), pidNamespace(), uint64(w.cookie))
	if err := w.allgather(mine, all); err != nil {
		w.release()
		return nil, err
	}
	w.peers = make([]remote, e.size)
	w.parts = make([][]byte, e.size)
	w.parts[e.rank] = buf
	w.attached = make([]*knem.Attachment, e.size)
	for r := range e.size {
		w.sizes[r] = int(getUint64(all[r], 0))
		w.peers[r] = remote{base: uintptr(getUint64(all[r], 1)), pid: int(getUint64(all[r], 2)),
			pidns: getUint64(all[r], 3), cookie: knem.Cookie(getUint64(all[r], 4))}
	}
	for t := range e.size {
		w.route[t] = w.choose(t, prefer)
	}
	return w, nil
}

func has(ms []Mechanism, m Mechanism) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// choose finds the first preferred mechanism usable toward t, keeping the
// reasons of those refused.
func (w *Window) choose(t int, prefer []Mechanism) Route {
	if t == w.e.rank {
		return Route{Mechanism: Self}
	}
	var r Route
	for _, m := range prefer {
		var err error
		switch m {
		case KnemAttach:
			err = w.attach(t)
		case Knem:
			err = w.knemUsable(t)
		case CMA:
			err = w.cmaUsable(t)
		}
		if err == nil {
			r.Mechanism = m
			return r
		}
		r.Refused = append(r.Refused, err)
	}
	r.Mechanism = AM
	return r
}

func (w *Window) knemUsable(t int) error {
	if err := checkKnem(t); err != nil {
		return err
	}
	if w.e.openKnem() == nil {
		return fmt.Errorf("rma: opening %s: %w", knem.DevicePath, w.e.knemErr)
	}
	if w.sizes[t] > 0 && w.peers[t].cookie == 0 {
		return knemRegionMissing(t)
	}
	return nil
}

func (w *Window) cmaUsable(t int) error {
	p := &w.peers[t]
	if here := pidNamespace(); p.pidns != here {
		return pidNamespaceRefusal(t, p.pid, p.pidns, here)
	}
	return checkCMA(t, p.pid)
}
