// Package ilist is the intrusive doubly linked list of package nemesis:
// posted receives, each destination's queued sends, unexpected messages
// and their free records all wait in one.
//
// An element embeds a [Links] and is on at most one list at a time through
// it; pushing and removing write a few pointers and allocate nothing, which
// is why the endpoint's per-message paths can keep their requests on lists.
// The links point at each other, not at the elements, so that the list's
// code reads fields of a type it knows and compiles to what a list written
// for one element type would (a list of elements that return their own
// links through a method costs an indirect call per step in generic code).
// Each Links therefore records its element when pushed.
//
// Nothing here is safe for concurrent use: the endpoint is single-threaded.
package ilist

// Links puts the element that embeds it on one List at a time. The zero
// value is an element on no list.
type Links[T any] struct {
	prev, next *Links[T]
	elem       *T
}

// Next returns the element after this one on its list, nil at the end.
func (n *Links[T]) Next() *T {
	if n.next == nil {
		return nil
	}
	return n.next.elem
}

// List is a FIFO of elements of type T; the zero value is empty.
type List[T any] struct{ head, tail *Links[T] }

// Empty reports whether the list holds no element.
func (l *List[T]) Empty() bool { return l.head == nil }

// Front returns the oldest element, nil when the list is empty.
func (l *List[T]) Front() *T {
	if l.head == nil {
		return nil
	}
	return l.head.elem
}

// PushBack appends e, whose embedded Links are n; e must be on no list.
func (l *List[T]) PushBack(e *T, n *Links[T]) {
	n.elem = e
	n.prev, n.next = l.tail, nil
	if l.tail == nil {
		l.head = n
	} else {
		l.tail.next = n
	}
	l.tail = n
}

// Remove takes the element whose Links are n off l, which must hold it.
func (l *List[T]) Remove(n *Links[T]) {
	if n.prev == nil {
		l.head = n.next
	} else {
		n.prev.next = n.next
	}
	if n.next == nil {
		l.tail = n.prev
	} else {
		n.next.prev = n.prev
	}
	n.prev, n.next = nil, nil
}
