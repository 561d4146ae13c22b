package lmttest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/cma"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/pipe"
)

// Sizes are the message sizes of the transfer matrix (256 MiB runs once per
// backend, in RunMatrix's last case).
var Sizes = []int{0, 1, 4095, 4096, 4097, 65535, 65536, 65537, 1 << 20, 16<<20 + 3}

// Huge is the size of the one-off large case.
const Huge = 256 << 20

// Case is one cell of the matrix.
type Case struct {
	Size             int
	SendOff, RecvOff int  // 0: page aligned; otherwise bytes past a page start
	SendIov, RecvIov bool // split into an iovec list with zero-length entries
}

func (c Case) String() string {
	shape := func(off int, iov bool) string {
		s := "aligned"
		if off != 0 {
			s = fmt.Sprintf("+%d", off)
		}
		if iov {
			return s + "/iov"
		}
		return s + "/contig"
	}
	return fmt.Sprintf("%d bytes, send %s, recv %s", c.Size, shape(c.SendOff, c.SendIov), shape(c.RecvOff, c.RecvIov))
}

// Cases crosses sizes with aligned/unaligned and contiguous/iovec on each side.
func Cases(sizes []int) []Case {
	var cs []Case
	for _, n := range sizes {
		for shape := 0; shape < 16; shape++ {
			cs = append(cs, Case{Size: n,
				SendOff: (shape & 1) * 1, RecvOff: (shape >> 1 & 1) * 3,
				SendIov: shape&4 != 0, RecvIov: shape&8 != 0})
		}
	}
	return cs
}

const (
	page  = 4096
	guard = 64
	// Fill value of the guard bytes around every receive segment.
	guardByte = 0xA5
	period    = 65521 // prime: a shifted or repeated chunk never matches
)

var pattern = func() []byte {
	p := make([]byte, 2*period)
	for i := range p {
		j := i % period
		p[i] = byte(j*7 + j/251 + 1)
	}
	return p
}()

// Fill writes the reference content of message bytes [at, at+len(b)).
func Fill(b []byte, at int) {
	for len(b) > 0 {
		o := at % period
		n := copy(b, pattern[o:o+period])
		b, at = b[n:], at+n
	}
}

// Message returns n bytes of reference content starting at seed: messages
// with different seeds differ, so that one delivered in another's place is
// caught.
func Message(n, seed int) []byte {
	b := make([]byte, n)
	Fill(b, seed)
	return b
}

// Check compares got with Message(len(got), seed) and names the first
// byte that differs. It builds the reference a window at a time, so that
// checking a message of gigabytes takes no second copy of it.
func Check(got []byte, seed int) error {
	want := make([]byte, min(len(got), 1<<20))
	for off := 0; off < len(got); off += len(want) {
		g := got[off:min(off+len(want), len(got))]
		w := want[:len(g)]
		Fill(w, seed+off)
		if bytes.Equal(g, w) {
			continue
		}
		for i := range g {
			if g[i] != w[i] {
				return fmt.Errorf("byte %d of %d is %#x, want %#x", off+i, len(got), g[i], w[i])
			}
		}
	}
	return nil
}

// Buffer is a message buffer in one or more segments, each with guard
// bytes on both sides inside one allocation.
type Buffer struct {
	Iov   [][]byte
	mem   []byte
	spans [][2]int // [start, end) of each segment in mem
}

// splits cuts n bytes into pieces with zero-length entries, pieces smaller
// than a page and pieces straddling pages.
func splits(n int) []int {
	var out []int
	for _, l := range []int{0, 1, 0, 4097, 3, 0} {
		if l > n {
			l = n
		}
		out = append(out, l)
		n -= l
	}
	out = append(out, n/2, 0, n-n/2, 0)
	return out
}

// NewBuffer allocates size bytes as described, guards filled.
func NewBuffer(size, off int, iov bool) *Buffer {
	lens := []int{size}
	if iov {
		lens = splits(size)
	}
	return NewSplitBuffer(off, lens)
}

// NewSplitBuffer allocates a buffer of len(lens) segments of the given
// lengths (zero allowed), the first off bytes past a page start, the others
// at varied page offsets, guards filled.
func NewSplitBuffer(off int, lens []int) *Buffer {
	total := page
	for _, l := range lens {
		total += guard + l + guard + 2*page
	}
	raw := make([]byte, total+page)
	// Start at a page boundary so that "aligned" means it.
	base := int((page - (addr(raw) % page)) % page)
	mem := raw[base:]
	for i := range mem {
		mem[i] = guardByte
	}
	b := &Buffer{mem: mem}
	pos := page
	for i, l := range lens {
		start := pos + off
		if i > 0 {
			start = pos + guard + (i*1237)%page // vary the page offset of each piece
		}
		b.Iov = append(b.Iov, mem[start:start+l:start+l])
		b.spans = append(b.spans, [2]int{start, start + l})
		pos = start + l + guard
		pos += page - pos%page
	}
	return b
}

// FillMessage writes the reference content into the buffer.
func (b *Buffer) FillMessage() {
	at := 0
	for _, s := range b.Iov {
		Fill(s, at)
		at += len(s)
	}
}

// Verify checks that the first n bytes hold the reference content, that
// the rest of the segments are untouched and every guard byte intact.
func (b *Buffer) Verify(n int) error {
	want := make([]byte, 0, 1<<16)
	at := 0
	for i, s := range b.Iov {
		got := s
		if len(got) > n-at {
			got = got[:max(n-at, 0)]
		}
		for o := 0; o < len(got); o += 1 << 16 {
			e := min(o+1<<16, len(got))
			want = want[:e-o]
			Fill(want, at+o)
			if !bytes.Equal(got[o:e], want) {
				j := 0
				for got[o+j] == want[j] {
					j++
				}
				return fmt.Errorf("segment %d: byte %d of the message is %#x, want %#x", i, at+o+j, got[o+j], want[j])
			}
		}
		for j := len(got); j < len(s); j++ {
			if s[j] != guardByte {
				return fmt.Errorf("segment %d: byte %d past the %d delivered was written", i, j, n)
			}
		}
		at += len(got)
	}
	inSpan := 0
	for j, c := range b.mem {
		for inSpan < len(b.spans) && j >= b.spans[inSpan][1] {
			inSpan++
		}
		if inSpan < len(b.spans) && j >= b.spans[inSpan][0] {
			continue
		}
		if c != guardByte {
			return fmt.Errorf("guard byte at offset %d overwritten with %#x", j, c)
		}
	}
	return nil
}

// Open connects a rank and creates its engine with backend forced first.
func Open(p launch.Proc, backend string, tune func(*lmt.Config)) (*Channel, *lmt.Engine, error) {
	ch, err := Connect(p)
	if err != nil {
		return nil, nil, err
	}
	cfg := ch.Config(p)
	if backend != "" {
		cfg.Prefer = []string{backend}
	}
	if tune != nil {
		tune(&cfg)
	}
	eng, err := lmt.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	ch.Engine = eng
	return ch, eng, nil
}

// Transfer sends c from rank src to rank dst (the calling rank must be one
// of them) with backend and checks content, guards and statistics on the
// receiving side.
func Transfer(ch *Channel, eng *lmt.Engine, backend string, src, dst int, c Case) error {
	rts := make([]byte, 4096)
	if ch.Rank == src {
		b := NewBuffer(c.Size, c.SendOff, c.SendIov)
		b.FillMessage()
		t, n, err := eng.StartSend(dst, b.Iov, backend, rts)
		if err != nil {
			return fmt.Errorf("%v: StartSend: %w", c, err)
		}
		if err := ch.SendRTS(dst, rts[:n]); err != nil {
			return err
		}
		if err := ch.Wait(t); err != nil {
			return fmt.Errorf("%v: send: %w", c, err)
		}
		return nil
	}
	r, err := ch.NextRTS(src)
	if err != nil {
		return err
	}
	b := NewBuffer(c.Size, c.RecvOff, c.RecvIov)
	t, err := eng.StartRecv(src, r, b.Iov)
	if err != nil {
		return fmt.Errorf("%v: StartRecv: %w", c, err)
	}
	if err := ch.Wait(t); err != nil {
		return fmt.Errorf("%v: receive: %w", c, err)
	}
	if err := b.Verify(c.Size); err != nil {
		return fmt.Errorf("%v: %w", c, err)
	}
	st := t.Stats()
	if st.Backend != backend || st.Bytes != int64(c.Size) {
		return fmt.Errorf("%v: stats %+v, want backend %s and %d bytes", c, st, backend, c.Size)
	}
	return checkCounts(backend, c, st)
}

// checkCounts holds the receiver's statistics to what the mechanism must
// cost: CMA reads one chunk (cma.Settings.Chunk) per process_vm_readv when
// both sides are contiguous; the shm ring makes no system call; the pipes
// make one per Step that moved data, or more.
func checkCounts(backend string, c Case, st lmt.Stats) error {
	chunks := (c.Size + cma.DefaultChunk - 1) / cma.DefaultChunk
	switch {
	case backend == lmt.CMA && !c.SendIov && !c.RecvIov && (st.Chunks != chunks || st.Syscalls != chunks):
		return fmt.Errorf("%v: %d chunks in %d process_vm_readv calls, want %d of each", c, st.Chunks, st.Syscalls, chunks)
	case backend == lmt.CMASplit && !c.SendIov && !c.RecvIov && (st.Chunks != splitChunks(c.Size) || st.Syscalls != splitChunks(c.Size)):
		return fmt.Errorf("%v: the receiver read its half in %d chunks and %d process_vm_readv calls, want %d of each", c, st.Chunks, st.Syscalls, splitChunks(c.Size))
	case backend == lmt.Shm && st.Syscalls != 0:
		return fmt.Errorf("%v: the shm ring made %d system calls", c, st.Syscalls)
	case (backend == lmt.Pipe || backend == lmt.Vmsplice) && st.Syscalls < st.Chunks:
		return fmt.Errorf("%v: %d chunks in %d system calls", c, st.Chunks, st.Syscalls)
	}
	return nil
}

// splitChunks is how many chunks the receiver of a cma-split transfer of
// size bytes reads: its half, up to the split point.
func splitChunks(size int) int {
	return int((lmt.SplitPoint(int64(size)) + cma.DefaultChunk - 1) / cma.DefaultChunk)
}

// RunMatrix runs every Case of Sizes from rank 0 to rank 1 with backend,
// then one Huge message.
func RunMatrix(t *testing.T, backend string, tune func(*lmt.Config)) {
	job := NewJob(2)
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Timeout: 3 * time.Minute}, func(p launch.Proc) error {
		ch, eng, err := Open(p, backend, tune)
		if err != nil {
			return err
		}
		defer ch.Close()
		for _, c := range Cases(Sizes) {
			if err := Transfer(ch, eng, backend, 0, 1, c); err != nil {
				return err
			}
		}
		huge := Case{Size: Huge, SendOff: 1, SendIov: true, RecvOff: 0}
		if os.Getenv("KNEMESIS_SHORT") != "" {
			huge.Size = 64<<20 + 5
		}
		return Transfer(ch, eng, backend, 0, 1, huge)
	})
}

// RunTruncation sends 1 MiB + 5 bytes into a buffer 4099 bytes shorter (an
// iovec list): the receive must end with lmt.ErrTruncated, the first bytes
// delivered and nothing written past the buffer; the send succeeds.
func RunTruncation(t *testing.T, backend string) {
	job := NewJob(2)
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup}, func(p launch.Proc) error {
		ch, eng, err := Open(p, backend, nil)
		if err != nil {
			return err
		}
		defer ch.Close()
		const size, short = 1<<20 + 5, 1<<20 + 5 - 4099
		for _, iov := range []bool{false, true} {
			rts := make([]byte, 4096)
			if p.Rank == 0 {
				b := NewBuffer(size, 1, iov)
				b.FillMessage()
				tr, n, err := eng.StartSend(1, b.Iov, backend, rts)
				if err != nil {
					return err
				}
				if err := ch.SendRTS(1, rts[:n]); err != nil {
					return err
				}
				if err := ch.Wait(tr); err != nil {
					return fmt.Errorf("send of a message truncated by the receiver: %w", err)
				}
				continue
			}
			r, err := ch.NextRTS(0)
			if err != nil {
				return err
			}
			b := NewBuffer(short, 3, iov)
			tr, err := eng.StartRecv(0, r, b.Iov)
			if err != nil {
				return err
			}
			err = ch.Wait(tr)
			var te *lmt.TruncationError
			if !errors.As(err, &te) || !errors.Is(err, lmt.ErrTruncated) || te.Len != size || te.Cap != short {
				return fmt.Errorf("truncated receive returned %v, want a TruncationError{%d, %d}", err, size, short)
			}
			if err := b.Verify(short); err != nil {
				return err
			}
		}
		return nil
	})
}

// RunPeerDies kills one side mid-transfer of 256 MiB: the survivor's Wait
// must return an error naming the dead rank. dying is 0 (sender dies) or 1.
func RunPeerDies(t *testing.T, backend string, dying int) {
	job := NewJob(2)
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup, Timeout: time.Minute, ExitEarly: []int{dying}}, func(p launch.Proc) error {
		ch, eng, err := Open(p, backend, func(c *lmt.Config) { c.Backends = append(c.Backends, pipe.Settings{Size: 64 << 10}) })
		if err != nil {
			return err
		}
		const size = 256 << 20
		b := NewBuffer(size, 0, false)
		var tr *lmt.Transfer
		rts := make([]byte, 4096)
		if p.Rank == 0 {
			var n int
			if tr, n, err = eng.StartSend(1, b.Iov, backend, rts); err != nil {
				return err
			}
			if err := ch.SendRTS(1, rts[:n]); err != nil {
				return err
			}
		} else {
			r, err := ch.NextRTS(0)
			if err != nil {
				return err
			}
			if tr, err = eng.StartRecv(0, r, b.Iov); err != nil {
				return err
			}
		}
		if p.Rank == dying {
			// Die mid-transfer. The side that moves data dies once 1 MiB
			// went; the passive side of a one-sided backend (the pull
			// sender, the push receiver) once its handle is out.
			for !tr.Done() && tr.Moved() < 1<<20 && !passive(backend, tr.Side()) {
				if err := ch.Step(); err != nil {
					return err
				}
			}
			if err := ch.Step(); err != nil {
				return err
			}
			os.Exit(0)
		}
		err = ch.Wait(tr)
		if err == nil {
			return fmt.Errorf("transfer completed although rank %d died", dying)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("rank %d", dying)) {
			return fmt.Errorf("error %q does not name the dead rank %d", err, dying)
		}
		fmt.Printf("rank %d after rank %d died: %v\n", p.Rank, dying, err)
		return nil
	})
}

func passive(backend string, side lmt.Side) bool {
	return backend == lmt.CMA && side == lmt.Sender || backend == lmt.CMAWrite && side == lmt.Receiver // cma-split: both copy
}

// RunManyPairs has every rank of a 4-process job send to every other at
// once, 3 MiB + rank bytes each, all transfers in flight together.
func RunManyPairs(t *testing.T, backend string) {
	const procs = 4
	job := NewJob(procs)
	launchtest.RunOpts(t, procs, launchtest.Options{Setup: job.Setup}, func(p launch.Proc) error {
		ch, eng, err := Open(p, backend, nil)
		if err != nil {
			return err
		}
		defer ch.Close()
		size := func(src, dst int) int { return 3<<20 + src*procs + dst }
		var sends, recvs []*lmt.Transfer
		var bufs []*Buffer
		var want []int
		for dst := 0; dst < procs; dst++ {
			if dst == p.Rank {
				continue
			}
			b := NewBuffer(size(p.Rank, dst), dst, dst%2 == 0)
			b.FillMessage()
			rts := make([]byte, 4096)
			tr, n, err := eng.StartSend(dst, b.Iov, backend, rts)
			if err != nil {
				return err
			}
			if err := ch.SendRTS(dst, rts[:n]); err != nil {
				return err
			}
			sends = append(sends, tr)
		}
		for src := 0; src < procs; src++ {
			if src == p.Rank {
				continue
			}
			r, err := ch.NextRTS(src)
			if err != nil {
				return err
			}
			b := NewBuffer(size(src, p.Rank), src+1, src%2 == 1)
			tr, err := eng.StartRecv(src, r, b.Iov)
			if err != nil {
				return err
			}
			recvs, bufs, want = append(recvs, tr), append(bufs, b), append(want, size(src, p.Rank))
		}
		for _, tr := range append(sends, recvs...) {
			if err := ch.Wait(tr); err != nil {
				return fmt.Errorf("%v: %w", tr, err)
			}
		}
		for i, b := range bufs {
			if err := b.Verify(want[i]); err != nil {
				return fmt.Errorf("from rank %v: %w", recvs[i].Peer(), err)
			}
		}
		return ch.Barrier()
	})
}

// RunManySegments moves 3000 segments of 97 bytes, more than IOV_MAX (1024)
// per system call, into 2500 segments of 117 bytes. The side whose address
// list travels in a handle (the cma sender, the cma-write receiver, both
// sides of cma-split) is contiguous: a handle carries at most
// Config.MaxSegments addresses.
func RunManySegments(t *testing.T, backend string) {
	id, _ := lmt.IdentityOf(backend)
	job := NewJob(2)
	launchtest.RunOpts(t, 2, launchtest.Options{Setup: job.Setup}, func(p launch.Proc) error {
		ch, eng, err := Open(p, backend, nil)
		if err != nil {
			return err
		}
		defer ch.Close()
		const size = 3000 * 97
		cut := func(b []byte, piece int) [][]byte {
			var iov [][]byte
			for len(b) > 0 {
				n := min(piece, len(b))
				iov = append(iov, b[:n:n])
				b = b[n:]
			}
			return iov
		}
		rts := make([]byte, 4096)
		if p.Rank == 0 {
			msg := make([]byte, size)
			Fill(msg, 0)
			iov := cut(msg, 97)
			if id.Flow == lmt.Pull || id.Flow == lmt.Split { // the sender's list travels in the RTS
				iov = [][]byte{msg}
			}
			tr, n, err := eng.StartSend(1, iov, backend, rts)
			if err != nil {
				return err
			}
			if err := ch.SendRTS(1, rts[:n]); err != nil {
				return err
			}
			return ch.Wait(tr)
		}
		r, err := ch.NextRTS(0)
		if err != nil {
			return err
		}
		got := make([]byte, size)
		iov := cut(got, 117)
		if id.Flow == lmt.Push || id.Flow == lmt.Split { // the receiver's list travels in the CTS
			iov = [][]byte{got}
		}
		tr, err := eng.StartRecv(0, r, iov)
		if err != nil {
			return err
		}
		if err := ch.Wait(tr); err != nil {
			return err
		}
		want := make([]byte, size)
		Fill(want, 0)
		if !bytes.Equal(got, want) {
			return errors.New("3000-segment message arrived corrupted")
		}
		if st := tr.Stats(); backend != lmt.Shm && id.Flow != lmt.Push && id.Flow != lmt.Split && st.Syscalls < 3 {
			return fmt.Errorf("%d system calls for 2500 receive segments, want ≥ 3 (IOV_MAX is 1024)", st.Syscalls)
		}
		return nil
	})
}
