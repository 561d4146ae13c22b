package nemesis

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"testing"

	"github.com/knemesis/knemesis/datatype"
	"github.com/knemesis/knemesis/internal/exitwait"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// The arena's single copy (arenasend.go), between processes: these jobs
// have no LMT, so every arena message past a fastbox goes as a descriptor.

const arenaTestSize = 4 << 20

// fillArena writes seed's pattern into b without memcopy.Copy, so that
// copy counts see only the transfer.
func fillArena(b []byte, seed int) {
	for i := range b {
		b[i] = byte(i*131 + seed*7 + i>>9)
	}
}

func arenaCRC(n, seed int) uint32 {
	b := make([]byte, n)
	fillArena(b, seed)
	return crc32.ChecksumIEEE(b)
}

// arenaMsg returns n bytes of ep's arena holding seed's pattern.
func arenaMsg(ep *Endpoint, n, seed int) ([]byte, error) {
	b, err := ep.Alloc(n)
	if err != nil {
		return nil, err
	}
	fillArena(b, seed)
	return b, nil
}

// arenaSizes: one byte over the crossover (a fastbox's payload), the
// medium sizes of the issue, and a large odd one.
func arenaSizes(ep *Endpoint) []int {
	return []int{ep.FastboxPayload() + 1, 16 << 10, 64 << 10, 1<<20 + 3}
}

// farewell tells peer this rank is done and waits until peer says the
// same: a rank must not leave while its peer still waits for something of
// it, or may take the rank's last message for a dead rank's.
func farewell(ep *Endpoint, peer int) error {
	const tag = MaxTag - 1
	if err := ep.Send(peer, tag, nil); err != nil {
		return err
	}
	_, err := ep.Recv(peer, tag, nil)
	return err
}

// guardedBuf returns a receive buffer of n bytes inside 64 guard bytes on
// each side, and the whole.
func guardedBuf(n int) (mem, buf []byte) {
	mem = bytes.Repeat([]byte{guardByte}, n+128)
	return mem, mem[64 : 64+n : 64+n]
}

func guardsIntact(mem []byte) bool {
	n := len(mem) - 128
	return bytes.Count(mem[:64], []byte{guardByte}) == 64 && bytes.Count(mem[64+n:], []byte{guardByte}) == 64
}

// TestArenaSend: messages one byte over the crossover, of 16 KiB, 64 KiB
// and 1 MiB+3 from arena buffers, and lists of arena buffers, reach a
// buffer, a list and a datatype intact (CRC-32), whether the receive was
// posted first or probed for and posted late; a short receive gets
// ErrTruncated with nothing written past it and the sender completes
// normally. Each went as a descriptor and was copied once: the counters
// of both sides are exact.
func TestArenaSend(t *testing.T) {
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{ArenaSize: arenaTestSize})
		if err != nil {
			return err
		}
		defer ep.Close()
		if p.Rank == 0 {
			return arenaSender(ep)
		}
		return arenaReceiver(ep)
	})
}

// arenaListLens splits n bytes over three arena buffers and an empty one.
func arenaListLens(n int) []int { return []int{n / 3, 0, 64, n - n/3 - 64} }

func arenaSender(ep *Endpoint) error {
	sizes := arenaSizes(ep)
	msgs := 0
	for i, n := range sizes {
		b, err := arenaMsg(ep, n, i)
		if err != nil {
			return err
		}
		if err := ep.Send(1, i, b); err != nil {
			return fmt.Errorf("%d bytes: %w", n, err)
		}
		var iov [][]byte // the same bytes, in pieces
		lens := arenaListLens(n)
		for k, l := range lens {
			var piece []byte
			if l > 0 {
				if piece, err = ep.Alloc(l); err != nil {
					return err
				}
				copy(piece, b[lenBefore(lens, k):])
			}
			iov = append(iov, piece)
		}
		if err := ep.Sendv(1, 100+i, iov); err != nil {
			return fmt.Errorf("list of %d bytes: %w", n, err)
		}
		msgs += 2
		for _, piece := range append(iov, b) {
			if len(piece) > 0 {
				if err := ep.Free(piece); err != nil {
					return err
				}
			}
		}
	}
	b, err := arenaMsg(ep, 64<<10, 7)
	if err != nil {
		return err
	}
	if err := ep.Send(1, 200, b); err != nil { // received truncated
		return fmt.Errorf("truncated at the receiver: %w", err)
	}
	msgs++
	st := ep.Stats()
	if st.ArenaSends != uint64(msgs) || st.RTS != 0 || st.QueueMsgs != 0 || st.FastboxMsgs != 0 {
		return fmt.Errorf("sender stats %+v: want %d arena descriptors and no other message", st, msgs)
	}
	return farewell(ep, 1)
}

func lenBefore(lens []int, k int) int {
	n := 0
	for _, l := range lens[:k] {
		n += l
	}
	return n
}

func arenaReceiver(ep *Endpoint) error {
	var copied uint64
	for i, n := range arenaSizes(ep) {
		late := i%2 == 1
		if late {
			st, err := ep.Probe(0, i)
			if err != nil || st.Len != n || st.Source != 0 || st.Tag != i {
				return fmt.Errorf("Probe of %d bytes: %+v, %v", n, st, err)
			}
		}
		mem, buf := guardedBuf(n)
		st, err := ep.Recv(0, i, buf)
		if err != nil || st.Count != n || crc32.ChecksumIEEE(buf) != arenaCRC(n, i) || !guardsIntact(mem) {
			return fmt.Errorf("%d bytes (probed first %v): %+v, %v, or the content or a guard byte differs", n, late, st, err)
		}
		copied += uint64(n)
		if err := recvArenaList(ep, n, i); err != nil {
			return err
		}
		copied += uint64(n)
	}
	// Truncated: 40000 bytes of a 64 KiB message, nothing past them.
	mem, buf := guardedBuf(40000)
	st, err := ep.Recv(0, 200, buf)
	want := make([]byte, 64<<10)
	fillArena(want, 7)
	if !errors.Is(err, ErrTruncated) || st.Count != 40000 || st.Len != 64<<10 || !bytes.Equal(buf, want[:40000]) || !guardsIntact(mem) {
		return fmt.Errorf("truncated receive: %+v, %v; want ErrTruncated after 40000 bytes, the guards intact", st, err)
	}
	copied += 40000
	stats := ep.Stats()
	if stats.ArenaRecvs != 9 || stats.ArenaBytes != copied {
		return fmt.Errorf("receiver stats %+v: want 9 arena messages and %d bytes copied once", stats, copied)
	}
	return farewell(ep, 0)
}

// recvArenaList receives the list message of n bytes and seed: into a
// list with unaligned entries for even seeds, into a vector datatype for
// odd ones.
func recvArenaList(ep *Endpoint, n, seed int) error {
	want := make([]byte, n)
	fillArena(want, seed)
	if seed%2 == 0 {
		mem, iov := guardedList([]int{n / 2, 7, n - n/2 - 7})
		st, err := ep.Recvv(0, 100+seed, iov)
		if err != nil || st.Count != n {
			return fmt.Errorf("list of %d bytes into a list: %+v, %v", n, st, err)
		}
		return checkList(mem, iov, want)
	}
	const block, stride = 64, 80
	blocks := (n + block - 1) / block
	typ, err := datatype.Vector(int64(blocks), block, stride)
	if err != nil {
		return err
	}
	base := bytes.Repeat([]byte{guardByte}, int(typ.Extent()))
	st, err := ep.RecvType(0, 100+seed, base, typ)
	if err != nil || st.Count != n {
		return fmt.Errorf("list of %d bytes into %d blocks: %+v, %v", n, blocks, st, err)
	}
	for b := range blocks {
		got := base[b*stride : b*stride+min(block, n-b*block)]
		if !bytes.Equal(got, want[b*block:b*block+len(got)]) {
			return fmt.Errorf("list of %d bytes: block %d differs", n, b)
		}
		if gap := base[b*stride+len(got) : min(b*stride+stride, len(base))]; bytes.Count(gap, []byte{guardByte}) != len(gap) {
			return fmt.Errorf("list of %d bytes: written between blocks %d and %d", n, b, b+1)
		}
	}
	return nil
}

// TestArenaSendWildcard: two ranks send from their arenas to rank 0,
// which receives with AnySource and AnyTag: every message arrives intact,
// each source's in the order it sent them.
func TestArenaSendWildcard(t *testing.T) {
	launchtest.Run(t, 3, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{ArenaSize: arenaTestSize})
		if err != nil {
			return err
		}
		defer ep.Close()
		sizes := []int{16 << 10, 64<<10 + 1, ep.FastboxPayload() + 1}
		if p.Rank != 0 {
			reqs := make([]Request, len(sizes))
			for i, n := range sizes {
				b, err := arenaMsg(ep, n, 10*p.Rank+i)
				if err != nil {
					return err
				}
				if err := ep.Isend(&reqs[i], 0, 10*p.Rank+i, b); err != nil {
					return err
				}
			}
			for i := range reqs {
				if err := ep.Wait(&reqs[i]); err != nil {
					return err
				}
			}
			// Rank 0 speaks first: AnyTag would match our word.
			if _, err := ep.Recv(0, MaxTag-1, nil); err != nil {
				return err
			}
			return ep.Send(0, MaxTag-1, nil)
		}
		next := []int{0, 0, 0}
		for range 2 * len(sizes) {
			buf := make([]byte, 64<<10+1)
			st, err := ep.Recv(AnySource, AnyTag, buf)
			if err != nil {
				return err
			}
			i := next[st.Source]
			next[st.Source]++
			if n := sizes[i]; st.Tag != 10*st.Source+i || st.Count != n || crc32.ChecksumIEEE(buf[:n]) != arenaCRC(n, st.Tag) {
				return fmt.Errorf("message %d from rank %d: %+v, want tag %d, %d bytes, or the content differs", i, st.Source, st, 10*st.Source+i, n)
			}
		}
		if st := ep.Stats(); st.ArenaRecvs != 6 {
			return fmt.Errorf("stats %+v: want 6 arena messages received", st)
		}
		for r := 1; r < 3; r++ {
			if err := farewell(ep, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestArenaSendOutOfOrder: two sends pending at once complete in the
// order their receives copy them, the reverse of the order they were
// sent in; and once every completion slot is taken, further sends go by
// the cells and everything still arrives, received in reverse order.
func TestArenaSendOutOfOrder(t *testing.T) {
	const extra = 6
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{ArenaSize: arenaTestSize})
		if err != nil {
			return err
		}
		defer ep.Close()
		if p.Rank == 1 {
			if err := recvArenaExpect(ep, 2, 16<<10); err != nil {
				return err
			}
			if err := ep.Send(0, 9, nil); err != nil { // B is in
				return err
			}
			if _, err := ep.Recv(0, 10, nil); err != nil { // go on with A
				return err
			}
			if err := recvArenaExpect(ep, 1, 64<<10); err != nil {
				return err
			}
			for tag := 100 + arenaSlots + extra - 1; tag >= 100; tag-- {
				if err := recvArenaExpect(ep, tag, 16<<10); err != nil {
					return err
				}
			}
			return farewell(ep, 0)
		}
		var a, b Request
		bufA, err := arenaMsg(ep, 64<<10, 1)
		if err != nil {
			return err
		}
		bufB, err := arenaMsg(ep, 16<<10, 2)
		if err != nil {
			return err
		}
		if err := ep.Isend(&a, 1, 1, bufA); err != nil {
			return err
		}
		if err := ep.Isend(&b, 1, 2, bufB); err != nil {
			return err
		}
		if _, err := ep.Recv(1, 9, nil); err != nil {
			return err
		}
		if err := ep.Wait(&b); err != nil {
			return err
		}
		if done, err := ep.Test(&a); done || err != nil {
			return fmt.Errorf("the first send completed (%v) before its receiver copied it", err)
		}
		if err := ep.Send(1, 10, nil); err != nil {
			return err
		}
		if err := ep.Wait(&a); err != nil {
			return err
		}
		// Every slot taken, then extra more.
		reqs := make([]Request, arenaSlots+extra)
		for i := range reqs {
			m, err := arenaMsg(ep, 16<<10, 100+i)
			if err != nil {
				return err
			}
			if err := ep.Isend(&reqs[i], 1, 100+i, m); err != nil {
				return err
			}
		}
		for i := range reqs {
			if err := ep.Wait(&reqs[i]); err != nil {
				return err
			}
		}
		// No slot frees before the receiver has the last message, which
		// leaves after all the others (some may have waited for cells).
		if st := ep.Stats(); st.ArenaSends != 2+arenaSlots || st.QueueMsgs != extra {
			return fmt.Errorf("stats %+v: want %d descriptors, then %d messages by the cells", st, 2+arenaSlots, extra)
		}
		if ep.arenaOut.busy != 0 {
			return fmt.Errorf("slots %#x still busy after every send completed", ep.arenaOut.busy)
		}
		return farewell(ep, 1)
	})
}

func recvArenaExpect(ep *Endpoint, tag, n int) error {
	buf := make([]byte, n)
	st, err := ep.Recv(0, tag, buf)
	if err != nil || st.Count != n || crc32.ChecksumIEEE(buf) != arenaCRC(n, tag) {
		return fmt.Errorf("tag %d: %+v, %v, or the content differs", tag, st, err)
	}
	return nil
}

// forgeArena sends to dst, as a broken peer would, a descriptor of a
// total-byte message with the given slot, piece count and pieces
// (offset and length pairs). When r is not nil it is armed on slot, as a
// real send, and completes with what its receiver stores there.
func forgeArena(ep *Endpoint, r *Request, dst, tag, total int, slot, count uint32, pieces ...uint64) error {
	gen := uint64(0xdead)
	if r != nil {
		r.start(ep, opSend, dst, tag)
		r.msgLen = total
		o := &ep.arenaOut
		o.gen++
		gen = o.gen
		o.busy |= 1 << slot
		o.reqs[slot], o.gens[slot] = r, gen
	}
	d := make([]byte, arenaDescHdr+8*len(pieces))
	le.PutUint64(d, gen)
	le.PutUint32(d[8:], slot)
	le.PutUint32(d[12:], count)
	for i, v := range pieces {
		le.PutUint64(d[arenaDescHdr+8*i:], v)
	}
	ok, err := ep.sendCell(dst, kindArena, tag, d, total)
	if err == nil && !ok {
		err = errors.New("no free cell for a forged descriptor")
	}
	return err
}

// TestArenaSendCorruptDescriptor: descriptors that name bytes outside the
// sender's region, a slot that does not exist, pieces that do not add up
// to the message or a wrong piece count fail the receive with ErrCorrupt
// naming the field, write nothing and read nothing outside the region;
// a sender whose slot was named is told its descriptor was refused.
// Both endpoints go on working.
func TestArenaSendCorruptDescriptor(t *testing.T) {
	cases := []struct {
		tag         int
		slot, count uint32
		pieces      []uint64
		says        string
	}{
		{1, 5, 1, []uint64{arenaTestSize - 50, 100}, "piece 0 is 100 bytes at offset 4194254, outside the rank's 4194304-byte region"},
		{2, 6, 1, []uint64{1 << 62, 100}, "outside the rank's"},
		{3, arenaSlots + 3, 1, []uint64{0, 100}, "names completion slot 67 (of 64)"},
		{4, 7, 1, []uint64{0, 50}, "its pieces hold 50 bytes of a 100-byte message"},
		{5, 8, 2, []uint64{0, 100}, "announces 2 pieces in 16 bytes"},
	}
	launchtest.Run(t, 2, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{ArenaSize: arenaTestSize})
		if err != nil {
			return err
		}
		defer ep.Close()
		if p.Rank == 0 {
			reqs := make([]Request, len(cases))
			for i, c := range cases {
				var r *Request
				if c.slot < arenaSlots {
					r = &reqs[i]
				}
				if err := forgeArena(ep, r, 1, c.tag, 100, c.slot, c.count, c.pieces...); err != nil {
					return err
				}
			}
			for i, c := range cases {
				if c.slot >= arenaSlots {
					continue
				}
				if err := ep.Wait(&reqs[i]); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "rank 1 refused") {
					return fmt.Errorf("forged send %d: %v, want ErrCorrupt saying rank 1 refused it", c.tag, err)
				}
			}
			b, err := arenaMsg(ep, 16<<10, 9)
			if err != nil {
				return err
			}
			return ep.Send(1, 9, b)
		}
		for _, c := range cases {
			mem, buf := guardedBuf(100)
			st, err := ep.Recv(0, c.tag, buf)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.says) || st.Count != 0 || bytes.Count(mem, []byte{guardByte}) != len(mem) {
				return fmt.Errorf("descriptor %d: %+v, %v; want ErrCorrupt saying %q and nothing written", c.tag, st, err, c.says)
			}
		}
		return recvArenaExpect(ep, 9, 16<<10)
	})
}

// TestArenaSendDeadReceiver: a send whose receiver dies before copying it
// fails with a PeerError naming the receiver, and its slot is free again.
func TestArenaSendDeadReceiver(t *testing.T) {
	launchtest.RunOpts(t, 2, launchtest.Options{ExitEarly: []int{1}}, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{ArenaSize: arenaTestSize})
		if err != nil {
			return err
		}
		if p.Rank == 1 {
			if err := ep.Send(0, 1, nil); err != nil {
				return err
			}
			if _, err := ep.Probe(0, 2); err != nil { // the descriptor is here
				return err
			}
			os.Exit(0) // never copies it
		}
		defer ep.Close()
		if _, err := ep.Recv(1, 1, nil); err != nil {
			return err
		}
		b, err := arenaMsg(ep, 64<<10, 2)
		if err != nil {
			return err
		}
		var r Request
		if err := ep.Isend(&r, 1, 2, b); err != nil {
			return err
		}
		err = ep.Wait(&r)
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Rank != 1 || !errors.Is(err, ErrPeerDead) {
			return fmt.Errorf("send to a receiver that died: %v, want a PeerError naming rank 1", err)
		}
		if ep.arenaOut.busy != 0 {
			return fmt.Errorf("slots %#x still busy after the send failed", ep.arenaOut.busy)
		}
		return nil
	})
}

// TestArenaSendClosedSender: Close abandons a pending arena send as any
// pending send (Test says ErrClosed), and its receiver still gets the
// message intact out of the region it maps.
func TestArenaSendClosedSender(t *testing.T) {
	eps := joinLocal(t, 2, &Options{ArenaSize: 1 << 20})
	a, b := eps[0], eps[1]
	msg, err := arenaMsg(a, 16<<10, 3)
	if err != nil {
		t.Fatal(err)
	}
	var s Request
	if err := a.Isend(&s, 1, 3, msg); err != nil {
		t.Fatal(err)
	}
	a.Close()
	if done, err := a.Test(&s); done || !errors.Is(err, ErrClosed) {
		t.Fatalf("Test of a pending arena send after Close: %v, %v; want ErrClosed", done, err)
	}
	buf := make([]byte, 16<<10)
	if st, err := b.Recv(0, 3, buf); err != nil || st.Count != len(buf) || crc32.ChecksumIEEE(buf) != arenaCRC(len(buf), 3) {
		t.Fatalf("receive from a closed sender: %+v, %v, or the content differs", st, err)
	}
}

// TestArenaSendNoAllocation: a message from the arena, single buffer or
// list, receive posted first or late, allocates nothing once the
// unexpected-message pool is warm, and every one goes as a descriptor.
func TestArenaSendNoAllocation(t *testing.T) {
	eps := joinLocal(t, 2, &Options{ArenaSize: 1 << 20})
	a, b := eps[0], eps[1]
	for _, n := range []int{a.FastboxPayload() + 1, 16 << 10} {
		msg, err := arenaMsg(a, n, 4)
		if err != nil {
			t.Fatal(err)
		}
		msgv := [][]byte{msg[:n/2], nil, msg[n/2:]}
		buf := make([]byte, n)
		bufv := [][]byte{buf[:100], buf[100:]}
		requireNoAllocs(t, a, b, msg, buf, msgv, bufv, 100, func() uint64 { return a.Stats().ArenaSends })
	}
}

// TestArenaSendDeadSender: a sender that dies right after its descriptor
// left still delivers: its receiver, posting only once the process is
// gone, copies the message intact out of the region the job's segment
// keeps mapped (no SIGBUS, no hang), and its own endpoint goes on working.
func TestArenaSendDeadSender(t *testing.T) {
	const n = 1<<20 + 3
	launchtest.RunOpts(t, 2, launchtest.Options{ExitEarly: []int{1}}, func(p launch.Proc) error {
		ep, err := JoinProc(p, &Options{ArenaSize: arenaTestSize})
		if err != nil {
			return err
		}
		if p.Rank == 1 {
			b, err := arenaMsg(ep, n, 6)
			if err != nil {
				return err
			}
			// Not before rank 0 has watched this process live: a rank
			// found gone at Join is failed at once, and what it left in
			// a fastbox no receive named yet is not looked at.
			if _, err := ep.Recv(0, 5, nil); err != nil {
				return err
			}
			var r Request
			if err := ep.Isend(&r, 0, 6, b); err != nil {
				return err
			}
			os.Exit(0) // the descriptor is out, the slot never read
		}
		defer ep.Close()
		if err := ep.Send(1, 5, nil); err != nil {
			return err
		}
		if err := waitExited(ep.peers[1].pid); err != nil {
			return err
		}
		buf := make([]byte, n)
		st, err := ep.Recv(1, 6, buf)
		if err != nil || st.Count != n || crc32.ChecksumIEEE(buf) != arenaCRC(n, 6) {
			return fmt.Errorf("receive from a sender that died: %+v, %v, or the content differs", st, err)
		}
		var r Request
		if err := ep.Irecv(&r, 1, 7, nil); err != nil {
			return err
		}
		var pe *PeerError
		if err := ep.Wait(&r); !errors.As(err, &pe) || pe.Rank != 1 {
			return fmt.Errorf("a further receive from the dead sender: %v, want a PeerError naming rank 1", err)
		}
		return nil
	})
}

// waitExited returns once process pid has exited.
func waitExited(pid int) error { return exitwait.Wait(pid) }
