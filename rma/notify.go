package rma

import "github.com/knemesis/knemesis/nemesis"

// Notification tells a target that a PutNotify of Len bytes at Offset in
// its part of the window, from rank Source, has landed: the bytes are
// there to read.
type Notification struct {
	Source, Tag int
	Offset, Len int
}

// noteQueue holds the notifications not yet taken, in arrival order; its
// storage is reused once it empties.
type noteQueue struct {
	items []Notification
	head  int
}

func (q *noteQueue) push(n Notification) { q.items = append(q.items, n) }

func (q *noteQueue) len() int { return len(q.items) - q.head }

// take removes and returns the oldest notification from src with tag
// (wildcards allowed).
func (q *noteQueue) take(src, tag int) (Notification, bool) {
	for i := q.head; i < len(q.items); i++ {
		n := q.items[i]
		if (src == nemesis.AnySource || n.Source == src) && (tag == nemesis.AnyTag || n.Tag == tag) {
			if i == q.head {
				q.head++
			} else {
				copy(q.items[i:], q.items[i+1:])
				q.items = q.items[:len(q.items)-1]
			}
			if q.head == len(q.items) {
				q.items, q.head = q.items[:0], 0
			}
			return n, true
		}
	}
	return Notification{}, false
}

// Notification polls once and takes the oldest notification from src with
// tag (nemesis.AnySource and nemesis.AnyTag match any), if one has come.
func (w *Window) Notification(src, tag int) (Notification, bool, error) {
	if w.rings != nil {
		return w.notificationRing(src, tag)
	}
	if n, ok := w.notes.take(src, tag); ok {
		return n, true, nil
	}
	w.e.ep.Expect(src, +1)
	err := w.e.ep.Poll()
	w.e.ep.Expect(src, -1)
	if err != nil {
		return Notification{}, false, err
	}
	n, ok := w.notes.take(src, tag)
	return n, ok, nil
}

// WaitNotification waits for the oldest notification from src with tag
// (wildcards allowed) and takes it. When src is gone (or, for AnySource,
// every other rank is) and nothing from it is left, it fails with a
// *TargetError naming the rank; so it does when the notification it
// finds next was being written by a rank that died (see the package doc).
func (w *Window) WaitNotification(src, tag int) (Notification, error) {
	if w.rings != nil {
		return w.waitRing(src, tag)
	}
	n, ok := w.notes.take(src, tag)
	if ok {
		return n, nil
	}
	if err := w.e.ep.Expect(src, +1); err != nil {
		return n, err
	}
	err := w.e.ep.WaitUntil(func() (bool, error) {
		if n, ok = w.notes.take(src, tag); ok {
			return true, nil
		}
		return false, w.e.silent(src)
	})
	w.e.ep.Expect(src, -1)
	return n, err
}

// silent returns why nothing more can come from src: a *TargetError when
// it (or, for AnySource, every other rank) is gone.
func (e *engine) silent(src int) error {
	if src != nemesis.AnySource {
		if src >= 0 && src < e.size && e.dead[src] != nil {
			return targetGone(src, e.dead[src])
		}
		return nil
	}
	var last error
	for r, err := range e.dead {
		if r == e.rank {
			continue
		}
		if err == nil {
			return nil
		}
		last = targetGone(r, err)
	}
	return last
}
