package rma

// opList is a FIFO of operations linked through Op.next: no allocation.
type opList struct{ head, tail *Op }

func (l *opList) push(op *Op) {
	op.next = nil
	if l.tail == nil {
		l.head = op
	} else {
		l.tail.next = op
	}
	l.tail = op
}

func (l *opList) pop() *Op {
	op := l.head
	if op == nil {
		return nil
	}
	l.head = op.next
	if l.head == nil {
		l.tail = nil
	}
	op.next = nil
	return op
}

// reply is what a target owes an origin: an acknowledgment of val puts,
// get data (n bytes of window win from off, sent so far), or an atomic's
// previous value val.
type reply struct {
	typ    uint8
	win    uint32
	off, n int
	sent   int
	val    uint64
}

// replyQueue is a FIFO whose storage is reused once it empties: a steady
// flow allocates nothing.
type replyQueue struct {
	items []reply
	head  int
}

func (q *replyQueue) len() int      { return len(q.items) - q.head }
func (q *replyQueue) front() *reply { return &q.items[q.head] }

// push queues r and reports whether it took a place of its own: an
// acknowledgment behind another joins it, and both go as one packet.
func (q *replyQueue) push(r reply) bool {
	if r.typ == pktAck && q.len() > 0 {
		if last := &q.items[len(q.items)-1]; last.typ == pktAck {
			last.val += r.val
			return false
		}
	}
	q.items = append(q.items, r)
	return true
}

func (q *replyQueue) pop() {
	q.head++
	if q.head == len(q.items) {
		q.reset()
	}
}

func (q *replyQueue) reset() { q.items, q.head = q.items[:0], 0 }

// collLen is the payload of one collective step: a window's description.
const collLen = 64

// collPkt is one rank's contribution to a collective step of a window.
type collPkt struct {
	win   uint32
	phase uint64
	src   int
	data  [collLen]byte
}
