package coll

import "github.com/knemesis/knemesis/internal/memcopy"

// The schedules, over bytes. Each builder adds q's rounds for this rank;
// every rank of the communicator builds its own side of the same
// pattern. Blocks are [off, off+len) ranges of a buffer, one per rank.

// fold sets acc = acc op in, element by element, over bytes that hold
// whole elements.
type fold func(acc, in []byte)

type block struct{ off, n int }

func (b block) of(buf []byte) []byte { return buf[b.off : b.off+b.n] }

// evenBlocks cuts count elements of size bytes into n blocks, the first
// count%n of them one element longer.
func evenBlocks(n, count, size int) []block {
	bl := make([]block, n)
	off := 0
	for i := range bl {
		k := count / n
		if i < count%n {
			k++
		}
		bl[i] = block{off * size, k * size}
		off += k
	}
	return bl
}

func blocksOf(counts, displs []int, size int) []block {
	bl := make([]block, len(counts))
	for i := range bl {
		bl[i] = block{displs[i] * size, counts[i] * size}
	}
	return bl
}

// barrier: dissemination, ⌈log2 n⌉ rounds of one empty message each way.
func (q *Request) barrier() {
	n, r := q.c.Size(), q.c.rank
	for dist := 1; dist < n; dist <<= 1 {
		rd := q.round()
		rd.recv((r-dist+n)%n, nil)
		rd.send((r+dist)%n, nil)
	}
}

// bcast: binomial tree from root; a rank receives from its parent, then
// sends to its children, the farthest first.
func (q *Request) bcast(buf []byte, root int) {
	n, r := q.c.Size(), q.c.rank
	vr := (r - root + n) % n
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			q.round().recv((vr-mask+root)%n, buf)
			break
		}
	}
	var rd *round
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			if rd == nil {
				rd = q.round()
			}
			rd.send((vr+mask+root)%n, buf)
		}
	}
}

// gatherv: every rank sends its block straight into root's buffer.
func (q *Request) gatherv(send, recv []byte, bl []block, root int) {
	c := q.c
	rd := q.round()
	if c.rank != root {
		rd.send(root, send)
		return
	}
	for i, b := range bl {
		if i != root {
			rd.recv(i, b.of(recv))
		}
	}
	if !aliased(send, bl[root].of(recv)) {
		rd.before = func() { memcopy.Copy(bl[root].of(recv), send) }
	}
}

// scatterv: root sends each rank its block.
func (q *Request) scatterv(send []byte, bl []block, recv []byte, root int) {
	c := q.c
	rd := q.round()
	if c.rank != root {
		rd.recv(root, recv)
		return
	}
	for i, b := range bl {
		if i != root {
			rd.send(i, b.of(send))
		}
	}
	if !aliased(recv, bl[root].of(send)) {
		rd.before = func() { memcopy.Copy(recv, bl[root].of(send)) }
	}
}

// ringAllgather: each rank's block, already in place in buf, goes round
// the ring: n-1 rounds, each passing on the block received last.
func (q *Request) ringAllgather(buf []byte, bl []block) {
	n, r := q.c.Size(), q.c.rank
	for k := 0; k < n-1; k++ {
		rd := q.round()
		rd.recv((r-1+n)%n, bl[(r-k-1+n)%n].of(buf))
		rd.send((r+1)%n, bl[(r-k+n)%n].of(buf))
	}
}

// bruck gathers n blocks of b bytes, own first, in ⌈log2 n⌉ rounds (Bruck
// et al.'s allgather, for any n); done gets them in rank order: done(i)
// is rank i's block.
func (q *Request) bruck(own []byte, b int) func(i int) []byte {
	n, r := q.c.Size(), q.c.rank
	tmp := scratch(n * b)
	memcopy.Copy(tmp[:b], own)
	for dist := 1; dist < n; dist <<= 1 {
		cnt := min(dist, n-dist)
		rd := q.round()
		rd.recv((r+dist)%n, tmp[dist*b:(dist+cnt)*b])
		rd.send((r-dist+n)%n, tmp[:cnt*b])
	}
	return func(i int) []byte {
		j := (i - r + n) % n
		return tmp[j*b : (j+1)*b]
	}
}

// alltoallv: every pair exchanges its blocks in one round.
func (q *Request) alltoallv(send []byte, sbl []block, recv []byte, rbl []block) {
	c := q.c
	rd := q.round()
	n, r := c.Size(), c.rank
	for k := 1; k < n; k++ {
		rd.recv((r-k+n)%n, rbl[(r-k+n)%n].of(recv))
		rd.send((r+k)%n, sbl[(r+k)%n].of(send))
	}
	rd.before = func() { memcopy.Copy(rbl[r].of(recv), sbl[r].of(send)) }
}

// reduceScatter: rank j gets block j of every rank's send and folds them
// in rank order into out (len bl[j].n); the blocks of send are bl.
func (q *Request) reduceScatter(send []byte, bl []block, out []byte, f fold) {
	c := q.c
	n, r := c.Size(), c.rank
	mine := bl[r].n
	parts := make([][]byte, n)
	parts[r] = bl[r].of(send)
	rd := q.round()
	tmp := scratch(mine * (n - 1))
	for k := 1; k < n; k++ {
		from := (r - k + n) % n
		parts[from] = tmp[(k-1)*mine : k*mine]
		rd.recv(from, parts[from])
		rd.send((r+k)%n, bl[(r+k)%n].of(send))
	}
	rd.after = func() error {
		acc := scratch(mine)
		memcopy.Copy(acc, parts[0])
		for i := 1; i < n; i++ {
			f(acc, parts[i])
		}
		memcopy.Copy(out, acc)
		return nil
	}
}

// foldAll folds the n blocks part(0..n-1) in rank order into out.
func foldAll(out []byte, n int, part func(int) []byte, f fold) {
	memcopy.Copy(out, part(0))
	for i := 1; i < n; i++ {
		f(out, part(i))
	}
}

// smallReduce reports whether a reduction of count elements of bytes in
// all goes by gathering whole contributions and folding them locally
// (latency: ⌈log2 n⌉ rounds) rather than by reduce-scatter (bandwidth:
// each rank folds a slice).
func smallReduce(n, count, bytes int) bool {
	return count < n || bytes <= 8<<10
}

// allreduce: the rank-order fold of every rank's send, in recv on every
// rank.
func (q *Request) allreduce(send, recv []byte, count int, f fold) {
	n := q.c.Size()
	if smallReduce(n, count, len(send)) {
		if n == 1 {
			memcopy.Copy(recv, send)
			return
		}
		part := q.bruck(send, len(send))
		q.rounds[len(q.rounds)-1].after = func() error {
			foldAll(recv, n, part, f)
			return nil
		}
		return
	}
	bl := evenBlocks(n, count, q.el.size)
	q.reduceScatter(send, bl, bl[q.c.rank].of(recv), f)
	q.ringAllgather(recv, bl)
}

// reduce: the rank-order fold of every rank's send, in root's recv.
func (q *Request) reduce(send, recv []byte, count int, f fold, root int) {
	c := q.c
	n, r := c.Size(), c.rank
	if n == 1 {
		memcopy.Copy(recv, send)
		return
	}
	if smallReduce(n, count, len(send)) {
		b := len(send)
		var all []byte
		if r == root {
			all = scratch(n * b)
		}
		q.gatherv(send, all, evenBlocks(n, n, b), root)
		if r == root {
			q.rounds[len(q.rounds)-1].after = func() error {
				foldAll(recv, n, func(i int) []byte { return all[i*b : (i+1)*b] }, f)
				return nil
			}
		}
		return
	}
	bl := evenBlocks(n, count, q.el.size)
	mine := scratch(bl[r].n)
	q.reduceScatter(send, bl, mine, f)
	q.gatherv(mine, recv, bl, root)
}

// scan: rank r gets the fold of ranks 0..r (inclusive) or 0..r-1
// (exclusive; rank 0's recv is left alone), passed down the ranks in
// order, so that each rank's result is the rank-order fold.
func (q *Request) scan(send, recv []byte, f fold, exclusive bool) {
	c := q.c
	n, r := c.Size(), c.rank
	b := len(send)
	next := scratch(b) // what rank r+1 gets: the fold of 0..r
	if r == 0 {
		memcopy.Copy(next, send)
		if !exclusive {
			memcopy.Copy(recv, send)
		}
	} else {
		rd := q.round()
		rd.recv(r-1, next)
		own := send
		if overlap(send, recv) {
			own = scratch(b)
			memcopy.Copy(own, send)
		}
		rd.after = func() error {
			if exclusive {
				memcopy.Copy(recv, next)
			}
			f(next, own)
			if !exclusive {
				memcopy.Copy(recv, next)
			}
			return nil
		}
	}
	if r < n-1 {
		q.round().send(r+1, next)
	}
}
