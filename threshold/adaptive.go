package threshold

import (
	"fmt"
	"math/bits"
	"time"
)

// Adaptive corrects a [Table] by measurement while the job runs.
//
// A table is a prediction: it knows the caches, not what the job does with
// its buffers (a buffer sent back right after it arrived is still dirty in
// the peer's cache, which halves a single copy) nor where a hypervisor
// placed the two vCPUs a moment ago (on this kind of VM the same pair of
// vCPUs moves between one core and two every few seconds, and the best
// backend at 1 MiB moves with it). Adaptive starts from the table's choice
// and keeps, per power-of-two size class, a running cost per byte of every
// candidate backend, fed by the sender's own completion times. It sends
// most messages by the cheapest candidate known and, every ExploreEvery
// messages of a class, two by another candidate in turn, so that a change
// is noticed within a few dozen messages. A candidate far costlier than the
// best waits more cycles for its turn (explorePeriod): the two messages
// cost it more. When the best changes, the one it displaced is measured
// again a few messages later, once: the change rested on a single look.
// Open MPI and MPICH fix their choice at startup; UCX's protocol selection
// estimates costs from a static performance model. This learns from the
// pair's own transfers.
//
// One Adaptive serves one pair of processes (costs differ between pairs)
// from one goroutine. Choose and Observe allocate nothing and take no lock.
type Adaptive struct {
	table   *Table
	cands   []Backend
	classes [maxClasses]sizeClass
	// ExploreEvery is how many messages of a size class pass at least
	// between two explorations of another candidate (default 24: each
	// sends two messages, so a candidate 1.4x slower costs about 3% on
	// average, and a large-message class adapts within a few dozen
	// messages), and ExploreBytes how many bytes (default 64 MiB, which
	// rules up to 2 MiB: 64 messages of 1 MiB, 1024 of 64 KiB): small
	// messages pay more for an exploration, whose first message finds the
	// candidate cold and whose return finds the best one cold.
	ExploreEvery uint32
	ExploreBytes int64
	// MinSize is the smallest message Adaptive weighs; smaller ones take
	// the table's choice (default 0: every message the table sends
	// through the LMT).
	MinSize int64
}

// maxClasses covers messages up to 2^47 bytes, far beyond any buffer.
const maxClasses = 48

// maxCandidates bounds the backends one Adaptive weighs.
const maxCandidates = 8

type sizeClass struct {
	sent uint32
	// since counts the messages and bytes since the last exploration.
	since      uint32
	sinceBytes int64
	// cost per byte of each candidate in ns, a running mean over recent
	// messages; 0 until measured.
	cost  [maxCandidates]float64
	next  uint8  // candidate the next exploration tries
	cycle uint32 // explorations so far
	// An exploration sends two messages by its candidate and counts only
	// the second (see send).
	again uint8 // 1 + the candidate to send once more, 0 for none
	last  uint8 // 1 + the candidate of the previous message
	warm  [maxCandidates]bool
	tried uint8 // candidates explored at least once, by index
	// recheck is 1 + a displaced best to measure again in recheckIn
	// messages (see Observe), 0 for none; rechecking is 1 + the
	// candidate such a measurement is under way for.
	recheck, rechecking uint8
	recheckIn           uint32
}

// NewAdaptive returns a selector starting from t and weighing candidates
// (backends usable with the peer; the table's own choices are added when
// missing).
func NewAdaptive(t *Table, candidates []Backend) (*Adaptive, error) {
	if t == nil {
		return nil, fmt.Errorf("threshold: NewAdaptive needs a table")
	}
	a := &Adaptive{table: t, ExploreEvery: 24, ExploreBytes: 64 << 20}
	add := func(b Backend) error {
		for _, c := range a.cands {
			if c == b {
				return nil
			}
		}
		if b == Eager || !b.Valid() {
			return fmt.Errorf("threshold: %q is not an LMT backend", b)
		}
		if len(a.cands) == maxCandidates {
			return fmt.Errorf("threshold: more than %d candidate backends", maxCandidates)
		}
		a.cands = append(a.cands, b)
		return nil
	}
	for _, r := range t.Rules {
		if err := add(r.Backend); err != nil {
			return nil, err
		}
	}
	for _, b := range candidates {
		if err := add(b); err != nil {
			return nil, err
		}
	}
	if len(a.cands) == 0 {
		return nil, fmt.Errorf("threshold: NewAdaptive: no candidate backend")
	}
	return a, nil
}

// Candidates returns the backends a weighs, in the order it explores them.
func (a *Adaptive) Candidates() []Backend { return a.cands }

func classOf(size int64) int {
	if size <= 0 {
		return 0
	}
	return min(bits.Len64(uint64(size))-1, maxClasses-1)
}

func (a *Adaptive) index(b Backend) int {
	for i, c := range a.cands {
		if c == b {
			return i
		}
	}
	return -1
}

// Choose returns the transfer method for a message of size bytes: the
// table's eager decision, else the backend with the lowest measured cost in
// the message's size class, the table's choice until another is measured.
// Once ExploreEvery messages and ExploreBytes bytes of the class have
// passed, the next candidate in turn is measured with two messages (see
// send).
func (a *Adaptive) Choose(size int64) Choice {
	c := a.table.Choose(size)
	if c.Eager || c.DMA || len(a.cands) == 1 || size < a.MinSize {
		// DMA offload is the module's decision, not a CPU backend's
		// cost: leave it to the table.
		return c
	}
	k := &a.classes[classOf(size)]
	k.sent++
	best := a.best(k, c.Backend)
	if k.sent == 1 {
		// The first exploration comes four times sooner than the next
		// ones: the table may be wrong for this placement, and a job
		// should not spend its first dozens of messages finding out.
		k.since = a.ExploreEvery - a.ExploreEvery/4
		k.sinceBytes = a.ExploreBytes - a.ExploreBytes/4
		return a.send(k, a.index(best))
	}
	if k.again != 0 {
		i := k.again - 1
		k.again = 0
		return a.send(k, int(i))
	}
	// No warm-up round through the candidates: a short job would pay
	// for it (each exploration's first message is cold) before it could
	// gain. Candidates are first measured on the regular schedule.
	pick := -1
	k.since++
	k.sinceBytes += size
	if k.recheckIn > 0 {
		k.recheckIn--
	}
	if i := int(k.recheck) - 1; i >= 0 && k.recheckIn == 0 {
		k.recheck = 0
		if a.cands[i] != best {
			pick = i
			k.rechecking = uint8(i + 1)
		}
	} else if i := a.untried(k, best); k.cycle > 0 && i >= 0 {
		// The first round of explorations runs back to back: once
		// the first is due, the candidates never tried follow at
		// once, so that a job has measured all of them within its
		// first dozen messages of a class, not one per cycle: a short
		// job (or a 15 ms lmtbench sample) otherwise paid a candidate's
		// first, coldest messages in the middle of its run.
		pick = i
		k.next = uint8((i + 1) % len(a.cands))
	} else if k.since >= max(a.ExploreEvery, 2) && k.sinceBytes >= a.ExploreBytes {
		k.since, k.sinceBytes = 0, 0
		k.cycle++
		bc := k.cost[a.index(best)]
		for range len(a.cands) {
			i := int(k.next) % len(a.cands)
			k.next = uint8((i + 1) % len(a.cands))
			if a.cands[i] != best && k.cycle%explorePeriod(k.cost[i], bc) == 0 {
				pick = i
				break
			}
		}
	}
	if pick < 0 {
		return a.send(k, a.index(best))
	}
	k.tried |= 1 << pick
	k.again = uint8(pick + 1)
	return a.send(k, pick)
}

// explorePeriod is every how many cycles a candidate last measured at cost
// is measured again while the best costs best. An exploration sends two
// messages by the candidate, the first of them cold (its ring or pipe out
// of the caches, up to twice its warm time and more), then returns to a
// best that has gone cold in turn: about 3(cost/best - 1) messages lost,
// not the 2(cost/best - 1) of two warm ones. Spacing the explorations as
// 1 + 10(cost/best - 1) cycles of ExploreEvery (24) messages keeps each
// candidate's share near 1%; half that spacing measurably cost auto
// against the table alone (docs/performance.md, threshold). A slower best
// is noticed without exploring (its own cost, measured on every message,
// rises past the others'); a faster candidate only by exploring it, so the
// period stops at 12 cycles: a candidate at twice the best's cost is
// measured again within 300 messages.
func explorePeriod(cost, best float64) uint32 {
	if cost == 0 || best == 0 || cost <= best {
		return 1
	}
	return uint32(min(1+10*(cost/best-1)+1e-9, 12)) // 1e-9: 1.4-1 is 0.3999...
}

// send returns candidate i as the choice, and marks its message as not
// counting when the previous one went another way: a backend's first
// message after others ran finds it cold (its ring or pipe out of the
// caches and the TLB), measured here up to 70 times its warm cost at
// 64 KiB. Counting those would keep every candidate, and the one in use
// after each exploration, looking worse than it is. A class's first
// message counts as such a switch, which also leaves out the one that
// opened a backend's channel (its FIFO or ring) to the peer.
func (a *Adaptive) send(k *sizeClass, i int) Choice {
	if k.last != uint8(i+1) {
		k.warm[i] = true
		k.last = uint8(i + 1)
	}
	return Choice{Backend: a.cands[i]}
}

// untried returns a candidate of class k other than best that was never
// explored nor measured, or -1.
func (a *Adaptive) untried(k *sizeClass, best Backend) int {
	for i, c := range a.cands {
		if c != best && k.tried&(1<<i) == 0 && k.cost[i] == 0 {
			return i
		}
	}
	return -1
}

// best is the cheapest measured candidate of class k, or fallback while
// none is measured.
func (a *Adaptive) best(k *sizeClass, fallback Backend) Backend {
	if bi := a.bestIndex(k); bi >= 0 {
		return a.cands[bi]
	}
	return fallback
}

// bestIndex is the index of the cheapest measured candidate of class k, or
// -1 while none is measured.
func (a *Adaptive) bestIndex(k *sizeClass) int {
	bi, bc := -1, 0.0
	for i := range a.cands {
		if c := k.cost[i]; c != 0 && (bi < 0 || c < bc) {
			bi, bc = i, c
		}
	}
	return bi
}

// Backend is Choose for package attach's Selector: the backend's name,
// or "" for the eager path.
func (a *Adaptive) Backend(size int64) string {
	c := a.Choose(size)
	if c.Eager {
		return ""
	}
	return string(c.Backend)
}

// Observe records that a message of size bytes took elapsed via backend,
// from its start to its completion on the sending side. Sizes the table
// sends eagerly and backends a does not weigh are ignored.
func (a *Adaptive) Observe(backend string, size int64, elapsed time.Duration) {
	i := a.index(Backend(backend))
	if i < 0 || size <= 0 || size < a.MinSize || elapsed <= 0 {
		return
	}
	k := &a.classes[classOf(size)]
	if k.warm[i] {
		k.warm[i] = false
		return
	}
	x := float64(elapsed) / float64(size)
	prev := a.bestIndex(k)
	recheck := k.rechecking == uint8(i+1)
	if recheck {
		k.rechecking = 0
	}
	if k.cost[i] == 0 || !a.isBest(k, i) {
		// A candidate off the best is measured once in a while: its
		// latest message says more about now than an average of old
		// ones (the first ones also fault in a ring or a pipe's pages).
		k.cost[i] = x
	} else {
		// The best one is measured on every message: a mean over the
		// last few follows the placement quickly. A sample counts for
		// at most twice the mean, so that one preempted message (here
		// up to 50 times a 64 KiB message's usual time) moves it by a
		// quarter, not enough to hand the class to a slower backend
		// until its next exploration; a lasting slowdown still
		// doubles it within a few messages.
		k.cost[i] += (min(x, 2*k.cost[i]) - k.cost[i]) / 4
	}
	if prev >= 0 && a.bestIndex(k) != prev && !recheck {
		// The best changed on one exploration's message, or because
		// its own mean rose past another's old figure: either way on
		// a single look at the other, while a disturbance of a few
		// messages may have raised the displaced one's cost. Without
		// a second look at it, a class could stay with the wrong
		// backend until that one's next exploration, a whole cycle
		// (64 MiB: 512 messages at 128 KiB) at up to twice the cost.
		// The recheck's own result stands, so two close candidates
		// do not take turns rechecking each other.
		k.recheck = uint8(prev + 1)
		k.recheckIn = a.ExploreEvery / 4
	}
}

// isBest reports whether candidate i has the lowest measured cost of k.
func (a *Adaptive) isBest(k *sizeClass, i int) bool {
	for j := range a.cands {
		if c := k.cost[j]; c != 0 && c < k.cost[i] {
			return false
		}
	}
	return true
}

// Costs returns the measured cost in ns per byte of each candidate for
// messages of size bytes (0 where not measured), in Candidates order.
func (a *Adaptive) Costs(size int64) []float64 {
	k := &a.classes[classOf(size)]
	return append([]float64(nil), k.cost[:len(a.cands)]...)
}
