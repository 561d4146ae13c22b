package coll

import "github.com/knemesis/knemesis/internal/memcopy"

// The operations. Each has a blocking form and a nonblocking one (I…,
// returning a *Request to Wait or Test on), is generic over the element
// type (Go methods take no type parameters), and moves the caller's
// slices as their bytes. Counts and displacements are in elements.
//
// In place (MPI_IN_PLACE): pass as send the very part of recv where this
// rank's own data lives: recv itself for Allreduce, Reduce (at root),
// Scan and Exscan; recv's block of this rank for Gather(v) (at root),
// Allgather(v), and, the other way round, send's block of this rank as
// recv for Scatter(v) at root. Any other overlap of send and recv is
// refused.

func wait(q *Request, err error) error {
	if err != nil {
		return err
	}
	return q.Wait()
}

func byteFold[T Number](op Op[T]) fold {
	return func(acc, in []byte) { op.fold(asElems[T](acc), asElems[T](in)) }
}

// checkRoot refuses a root outside the communicator.
func (q *Request) checkRoot(root int) error {
	if root < 0 || root >= q.c.Size() {
		return argErr("root %d in a communicator of %d", root, q.c.Size())
	}
	return nil
}

// inPlaceOrApart refuses send and recv that overlap without being the
// in-place form (send starting where recv does).
func inPlaceOrApart(send, recv []byte) error {
	if overlap(send, recv) && !aliased(send, recv) {
		return argErr("send and recv overlap without being the in-place form (send the very start of recv)")
	}
	return nil
}

// checkBlocks checks counts and displs (elements) of n blocks in a buffer
// of length elements.
func checkBlocks(what string, counts, displs []int, n, length int) error {
	if len(counts) != n || len(displs) != n {
		return argErr("%s: %d counts and %d displacements for %d ranks", what, len(counts), len(displs), n)
	}
	for i := range n {
		if counts[i] < 0 || displs[i] < 0 || displs[i] > length || counts[i] > length-displs[i] {
			return argErr("%s: rank %d's block [%d, +%d) outside a buffer of %d elements", what, i, displs[i], counts[i], length)
		}
	}
	return nil
}

func equalCounts(n, k int) ([]int, []int) {
	counts, displs := make([]int, n), make([]int, n)
	for i := range n {
		counts[i], displs[i] = k, i*k
	}
	return counts, displs
}

// Barrier returns once every rank of c has called it.
func Barrier(c *Comm) error { return wait(Ibarrier(c)) }

// Ibarrier is Barrier's nonblocking form.
func Ibarrier(c *Comm) (*Request, error) {
	q, err := c.start(collBarrier, elem{}, opNone)
	if err != nil {
		return nil, err
	}
	if c.shmUsable(0) {
		q.shmOp(0, 0, nil, nil, nil)
	} else {
		q.barrier()
	}
	return q.run()
}

// Bcast copies root's buf into every other rank's buf, of the same length.
func Bcast[T Number](c *Comm, buf []T, root int) error { return wait(Ibcast(c, buf, root)) }

// Ibcast is Bcast's nonblocking form.
func Ibcast[T Number](c *Comm, buf []T, root int) (*Request, error) {
	b := asBytes(buf)
	q, err := c.start(collBcast, elemOf[T](), opNone)
	if err != nil {
		return nil, err
	}
	shm := c.shmUsable(len(b))
	if err := q.checkRoot(root); err != nil {
		return q.refuse(err)
	}
	switch {
	case shm && c.rank == root:
		q.shmOp(root, len(b), func(slot []byte) { memcopy.Copy(slot, b) }, nil, nil)
	case shm:
		q.shmOp(root, len(b), nil, nil, func(slot []byte) { memcopy.Copy(b, slot) })
	default:
		q.bcast(b, root)
	}
	return q.run()
}

// Reduce leaves in root's recv the rank-order fold by op of every rank's
// send (see Op); recv is used at root only, and holds len(send) elements.
func Reduce[T Number](c *Comm, send, recv []T, op Op[T], root int) error {
	return wait(Ireduce(c, send, recv, op, root))
}

// Ireduce is Reduce's nonblocking form.
func Ireduce[T Number](c *Comm, send, recv []T, op Op[T], root int) (*Request, error) {
	q, err := c.start(collReduce, elemOf[T](), op.code)
	if err != nil {
		return nil, err
	}
	shm := c.shmUsable(len(asBytes(send)))
	if err := q.checkRoot(root); err != nil {
		return q.refuse(err)
	}
	if err := checkOp(op); err != nil {
		return q.refuse(err)
	}
	if c.rank == root {
		if len(recv) != len(send) {
			return q.refuse(argErr("Reduce at root: recv holds %d elements, send %d", len(recv), len(send)))
		}
		if err := inPlaceOrApart(asBytes(send), asBytes(recv)); err != nil {
			return q.refuse(err)
		}
	}
	if shm {
		q.shmReduce(asBytes(send), asBytes(recv), byteFold(op), root, c.rank == root)
	} else {
		q.reduce(asBytes(send), asBytes(recv), len(send), byteFold(op), root)
	}
	return q.run()
}

func checkOp[T Number](op Op[T]) error {
	if op.fold == nil {
		return argErr("a zero Op: use Sum, Min, ... or NewOp")
	}
	return nil
}

// Allreduce leaves in every rank's recv the rank-order fold by op of
// every rank's send (see Op): bit-identical on every rank.
func Allreduce[T Number](c *Comm, send, recv []T, op Op[T]) error {
	return wait(Iallreduce(c, send, recv, op))
}

// Iallreduce is Allreduce's nonblocking form.
func Iallreduce[T Number](c *Comm, send, recv []T, op Op[T]) (*Request, error) {
	q, err := c.start(collAllreduce, elemOf[T](), op.code)
	if err != nil {
		return nil, err
	}
	shm := c.shmUsable(len(asBytes(send)))
	if err := checkOp(op); err != nil {
		return q.refuse(err)
	}
	if len(recv) != len(send) {
		return q.refuse(argErr("Allreduce: recv holds %d elements, send %d", len(recv), len(send)))
	}
	if err := inPlaceOrApart(asBytes(send), asBytes(recv)); err != nil {
		return q.refuse(err)
	}
	if shm {
		q.shmReduce(asBytes(send), asBytes(recv), byteFold(op), 0, true)
	} else {
		q.allreduce(asBytes(send), asBytes(recv), len(send), byteFold(op))
	}
	return q.run()
}

// Gather puts every rank's send, all of one length k, into root's recv,
// rank i's at recv[i*k:]; recv is used at root only.
func Gather[T Number](c *Comm, send, recv []T, root int) error {
	return wait(Igather(c, send, recv, root))
}

// Igather is Gather's nonblocking form.
func Igather[T Number](c *Comm, send, recv []T, root int) (*Request, error) {
	counts, displs := equalCounts(c.Size(), len(send))
	if c.rank == root && len(recv) != c.Size()*len(send) {
		return igatherv(c, send, recv, nil, nil, root, argErr("Gather at root: recv holds %d elements, want %d ranks × %d", len(recv), c.Size(), len(send)))
	}
	return igatherv(c, send, recv, counts, displs, root, nil)
}

// Gatherv puts every rank's send into root's recv, rank i's counts[i]
// elements at displs[i]; recv, counts and displs are used at root only.
func Gatherv[T Number](c *Comm, send, recv []T, counts, displs []int, root int) error {
	return wait(Igatherv(c, send, recv, counts, displs, root))
}

// Igatherv is Gatherv's nonblocking form.
func Igatherv[T Number](c *Comm, send, recv []T, counts, displs []int, root int) (*Request, error) {
	return igatherv(c, send, recv, counts, displs, root, nil)
}

func igatherv[T Number](c *Comm, send, recv []T, counts, displs []int, root int, bad error) (*Request, error) {
	q, err := c.start(collGather, elemOf[T](), opNone)
	if err != nil {
		return nil, err
	}
	if bad == nil {
		bad = q.checkRoot(root)
	}
	if bad == nil && c.rank == root {
		bad = checkBlocks("Gatherv", counts, displs, c.Size(), len(recv))
		if bad == nil && counts[root] != len(send) {
			bad = argErr("Gatherv at root: its own count is %d, its send %d elements", counts[root], len(send))
		}
	}
	if bad != nil {
		return q.refuse(bad)
	}
	var bl []block
	if c.rank == root {
		bl = blocksOf(counts, displs, q.el.size)
	}
	q.gatherv(asBytes(send), asBytes(recv), bl, root)
	return q.run()
}

// Scatter sends each rank i root's send[i*k:(i+1)*k], k = len(recv) on
// every rank; send is used at root only.
func Scatter[T Number](c *Comm, send, recv []T, root int) error {
	return wait(Iscatter(c, send, recv, root))
}

// Iscatter is Scatter's nonblocking form.
func Iscatter[T Number](c *Comm, send, recv []T, root int) (*Request, error) {
	counts, displs := equalCounts(c.Size(), len(recv))
	if c.rank == root && len(send) != c.Size()*len(recv) {
		return iscatterv(c, send, nil, nil, recv, root, argErr("Scatter at root: send holds %d elements, want %d ranks × %d", len(send), c.Size(), len(recv)))
	}
	return iscatterv(c, send, counts, displs, recv, root, nil)
}

// Scatterv sends each rank i root's counts[i] elements at displs[i] of
// send, into its recv; send, counts and displs are used at root only.
func Scatterv[T Number](c *Comm, send []T, counts, displs []int, recv []T, root int) error {
	return wait(Iscatterv(c, send, counts, displs, recv, root))
}

// Iscatterv is Scatterv's nonblocking form.
func Iscatterv[T Number](c *Comm, send []T, counts, displs []int, recv []T, root int) (*Request, error) {
	return iscatterv(c, send, counts, displs, recv, root, nil)
}

func iscatterv[T Number](c *Comm, send []T, counts, displs []int, recv []T, root int, bad error) (*Request, error) {
	q, err := c.start(collScatter, elemOf[T](), opNone)
	if err != nil {
		return nil, err
	}
	if bad == nil {
		bad = q.checkRoot(root)
	}
	if bad == nil && c.rank == root {
		bad = checkBlocks("Scatterv", counts, displs, c.Size(), len(send))
		if bad == nil && counts[root] != len(recv) {
			bad = argErr("Scatterv at root: its own count is %d, its recv %d elements", counts[root], len(recv))
		}
	}
	if bad != nil {
		return q.refuse(bad)
	}
	var bl []block
	if c.rank == root {
		bl = blocksOf(counts, displs, q.el.size)
	}
	q.scatterv(asBytes(send), bl, asBytes(recv), root)
	return q.run()
}

// bruckMax is the most bytes an Allgather of equal blocks gathers by
// Bruck's ⌈log2 n⌉ rounds (through a scratch copy); above it the blocks go
// round the ring, n-1 rounds straight into recv.
const bruckMax = 64 << 10

// Allgather puts every rank's send, all of one length k, into every
// rank's recv, rank i's at recv[i*k:].
func Allgather[T Number](c *Comm, send, recv []T) error { return wait(Iallgather(c, send, recv)) }

// Iallgather is Allgather's nonblocking form.
func Iallgather[T Number](c *Comm, send, recv []T) (*Request, error) {
	n := c.Size()
	if len(recv) != n*len(send) {
		return iallgatherv(c, send, recv, nil, nil, argErr("Allgather: recv holds %d elements, want %d ranks × %d", len(recv), n, len(send)))
	}
	counts, displs := equalCounts(n, len(send))
	return iallgatherv(c, send, recv, counts, displs, nil)
}

// Allgatherv puts every rank's send into every rank's recv, rank i's
// counts[i] elements at displs[i].
func Allgatherv[T Number](c *Comm, send, recv []T, counts, displs []int) error {
	return wait(Iallgatherv(c, send, recv, counts, displs))
}

// Iallgatherv is Allgatherv's nonblocking form.
func Iallgatherv[T Number](c *Comm, send, recv []T, counts, displs []int) (*Request, error) {
	return iallgatherv(c, send, recv, counts, displs, nil)
}

func iallgatherv[T Number](c *Comm, send, recv []T, counts, displs []int, bad error) (*Request, error) {
	q, err := c.start(collAllgather, elemOf[T](), opNone)
	if err != nil {
		return nil, err
	}
	n, r := c.Size(), c.rank
	if bad == nil {
		bad = checkBlocks("Allgatherv", counts, displs, n, len(recv))
	}
	if bad == nil && counts[r] != len(send) {
		bad = argErr("Allgatherv: this rank's count is %d, its send %d elements", counts[r], len(send))
	}
	if bad != nil {
		return q.refuse(bad)
	}
	sb, rb := asBytes(send), asBytes(recv)
	bl := blocksOf(counts, displs, q.el.size)
	if overlap(sb, rb) && !aliased(sb, bl[r].of(rb)) {
		return q.refuse(argErr("Allgatherv: send overlaps recv other than as recv's block of this rank (the in-place form)"))
	}
	if equal(counts, displs) && len(sb)*n <= bruckMax {
		part := q.bruck(sb, len(sb))
		if n == 1 {
			memcopy.Copy(rb, sb)
		} else {
			q.rounds[len(q.rounds)-1].after = func() error {
				for i := range n {
					memcopy.Copy(bl[i].of(rb), part(i))
				}
				return nil
			}
		}
		return q.run()
	}
	if !aliased(sb, bl[r].of(rb)) {
		memcopy.Copy(bl[r].of(rb), sb)
	}
	q.ringAllgather(rb, bl)
	return q.run()
}

// equal reports whether the blocks are of one length, end to end.
func equal(counts, displs []int) bool {
	for i := range counts {
		if counts[i] != counts[0] || displs[i] != i*counts[0] {
			return false
		}
	}
	return true
}

// Alltoall sends rank i the i-th of n equal blocks of send, and puts the
// block rank i sent this one at the i-th of recv's; send and recv have the
// same length, a multiple of n, and must not overlap.
func Alltoall[T Number](c *Comm, send, recv []T) error { return wait(Ialltoall(c, send, recv)) }

// Ialltoall is Alltoall's nonblocking form.
func Ialltoall[T Number](c *Comm, send, recv []T) (*Request, error) {
	n := c.Size()
	if len(send) != len(recv) || len(send)%n != 0 {
		return ialltoallv(c, send, nil, nil, recv, nil, nil, argErr("Alltoall: send %d and recv %d elements, want equal and a multiple of %d ranks", len(send), len(recv), n))
	}
	counts, displs := equalCounts(n, len(send)/n)
	return ialltoallv(c, send, counts, displs, recv, counts, displs, nil)
}

// Alltoallv sends rank i scounts[i] elements of send at sdispls[i], and
// puts what rank i sent this one at rdispls[i] of recv (rcounts[i]
// elements); send and recv must not overlap.
func Alltoallv[T Number](c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) error {
	return wait(Ialltoallv(c, send, scounts, sdispls, recv, rcounts, rdispls))
}

// Ialltoallv is Alltoallv's nonblocking form.
func Ialltoallv[T Number](c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) (*Request, error) {
	return ialltoallv(c, send, scounts, sdispls, recv, rcounts, rdispls, nil)
}

func ialltoallv[T Number](c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int, bad error) (*Request, error) {
	q, err := c.start(collAlltoall, elemOf[T](), opNone)
	if err != nil {
		return nil, err
	}
	n, r := c.Size(), c.rank
	if bad == nil {
		bad = checkBlocks("Alltoallv send", scounts, sdispls, n, len(send))
	}
	if bad == nil {
		bad = checkBlocks("Alltoallv recv", rcounts, rdispls, n, len(recv))
	}
	if bad == nil && scounts[r] != rcounts[r] {
		bad = argErr("Alltoallv: this rank sends itself %d elements and receives %d", scounts[r], rcounts[r])
	}
	if bad == nil && overlap(asBytes(send), asBytes(recv)) {
		bad = argErr("Alltoallv: send and recv overlap")
	}
	if bad != nil {
		return q.refuse(bad)
	}
	q.alltoallv(asBytes(send), blocksOf(scounts, sdispls, q.el.size), asBytes(recv), blocksOf(rcounts, rdispls, q.el.size))
	return q.run()
}

// ReduceScatter folds every rank's send by op in rank order (see Op) and
// leaves in rank i's recv the i-th part of the result, counts[i]
// elements: send holds the sum of counts, parts end to end. send and recv
// must not overlap.
func ReduceScatter[T Number](c *Comm, send, recv []T, counts []int, op Op[T]) error {
	return wait(IreduceScatter(c, send, recv, counts, op))
}

// IreduceScatter is ReduceScatter's nonblocking form.
func IreduceScatter[T Number](c *Comm, send, recv []T, counts []int, op Op[T]) (*Request, error) {
	q, err := c.start(collReduceScatter, elemOf[T](), op.code)
	if err != nil {
		return nil, err
	}
	n, r := c.Size(), c.rank
	bad := checkOp(op)
	displs := make([]int, len(counts))
	total := 0
	for i, k := range counts {
		displs[i] = total
		total += max(k, 0)
	}
	if bad == nil {
		bad = checkBlocks("ReduceScatter", counts, displs, n, len(send))
	}
	if bad == nil && (total != len(send) || counts[r] != len(recv)) {
		bad = argErr("ReduceScatter: counts sum to %d for a send of %d, this rank's count %d for a recv of %d", total, len(send), counts[r], len(recv))
	}
	if bad == nil && overlap(asBytes(send), asBytes(recv)) {
		bad = argErr("ReduceScatter: send and recv overlap")
	}
	if bad != nil {
		return q.refuse(bad)
	}
	q.reduceScatter(asBytes(send), blocksOf(counts, displs, q.el.size), asBytes(recv), byteFold(op))
	return q.run()
}

// Scan leaves in rank r's recv the rank-order fold by op of the sends of
// ranks 0..r.
func Scan[T Number](c *Comm, send, recv []T, op Op[T]) error { return wait(Iscan(c, send, recv, op)) }

// Iscan is Scan's nonblocking form.
func Iscan[T Number](c *Comm, send, recv []T, op Op[T]) (*Request, error) {
	return iscan(c, send, recv, op, collScan)
}

// Exscan leaves in rank r's recv the rank-order fold by op of the sends
// of ranks 0..r-1; rank 0's recv is left as it was.
func Exscan[T Number](c *Comm, send, recv []T, op Op[T]) error {
	return wait(Iexscan(c, send, recv, op))
}

// Iexscan is Exscan's nonblocking form.
func Iexscan[T Number](c *Comm, send, recv []T, op Op[T]) (*Request, error) {
	return iscan(c, send, recv, op, collExscan)
}

func iscan[T Number](c *Comm, send, recv []T, op Op[T], kind uint8) (*Request, error) {
	q, err := c.start(kind, elemOf[T](), op.code)
	if err != nil {
		return nil, err
	}
	bad := checkOp(op)
	if bad == nil && len(recv) != len(send) {
		bad = argErr("%s: recv holds %d elements, send %d", collName(kind), len(recv), len(send))
	}
	if bad == nil {
		bad = inPlaceOrApart(asBytes(send), asBytes(recv))
	}
	if bad != nil {
		return q.refuse(bad)
	}
	q.scan(asBytes(send), asBytes(recv), byteFold(op), kind == collExscan)
	return q.run()
}
