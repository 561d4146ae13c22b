// Package rmatest holds what the tests of package rma share with the knem
// window tests that run in the QEMU guests (rma/internal/knemtest): window
// kinds, a job runner, patterned data checked by checksum with guard bytes,
// and the put/get and notification cases themselves.
package rmatest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/rma"
)

// Kind is one way of making a window, with the mechanism its remote
// operations must then use.
type Kind struct {
	Name string
	Mech rma.Mechanism
	Make func(ep *nemesis.Endpoint, size int) (*rma.Window, error)
}

func exposeWith(m rma.Mechanism) func(ep *nemesis.Endpoint, size int) (*rma.Window, error) {
	return func(ep *nemesis.Endpoint, size int) (*rma.Window, error) {
		return rma.Expose(ep, make([]byte, size), &rma.Options{Prefer: []rma.Mechanism{m}})
	}
}

// The window kinds.
var (
	Allocated = Kind{rma.Allocated.String(), rma.Allocated, func(ep *nemesis.Endpoint, size int) (*rma.Window, error) { return rma.Allocate(ep, size, nil) }}
	CMA       = Kind{rma.CMA.String(), rma.CMA, exposeWith(rma.CMA)}
	AM        = Kind{rma.AM.String(), rma.AM, exposeWith(rma.AM)}
	Knem      = Kind{rma.Knem.String(), rma.Knem, exposeWith(rma.Knem)}
	// KnemAttach: the knem region of each target mapped into the
	// initiator.
	KnemAttach = Kind{rma.KnemAttach.String(), rma.KnemAttach, exposeWith(rma.KnemAttach)}
)

// Run runs fn as each rank of a job of n, with an endpoint and a window of
// kind k whose part in every rank is size bytes; it checks that remote
// operations use k's mechanism and frees the window.
func Run(t *testing.T, n int, k Kind, size int, fn func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error) {
	t.Helper()
	launchtest.Run(t, n, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		defer ep.Close()
		w, err := k.Make(ep, size)
		if err != nil {
			return err
		}
		for r := range n {
			want := k.Mech
			if r == p.Rank {
				want = rma.Self
			}
			if got := w.Route(r); got.Mechanism != want {
				return fmt.Errorf("route to rank %d: %v, want %v", r, got, want)
			}
		}
		if err := fn(p, ep, w); err != nil {
			return err
		}
		return w.Free()
	})
}

// Pattern fills b with bytes that depend on seed and position, eight at a
// time (the knem cases run under QEMU's TCG, where a byte loop over 16 MiB
// costs seconds).
func Pattern(b []byte, seed int) {
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	next := func() uint64 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], next())
	}
	for ; i < len(b); i++ {
		b[i] = byte(next())
	}
}

// CRC is the checksum the tests compare.
func CRC(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

// CheckRange verifies that b holds Pattern(seed) in [off, off+n) (by
// checksum) and guard everywhere else.
func CheckRange(b []byte, off, n, seed int, guard byte) error {
	want := make([]byte, n)
	Pattern(want, seed)
	if got := CRC(b[off : off+n]); got != CRC(want) {
		return fmt.Errorf("%d bytes at %d: checksum %08x, want %08x", n, off, got, CRC(want))
	}
	if i := firstNot(b[:off], guard); i >= 0 {
		return fmt.Errorf("guard byte %d of %d changed to %#x (range %d+%d)", i, len(b), b[i], off, n)
	}
	if i := firstNot(b[off+n:], guard); i >= 0 {
		i += off + n
		return fmt.Errorf("guard byte %d of %d changed to %#x (range %d+%d)", i, len(b), b[i], off, n)
	}
	return nil
}

// firstNot is the index of the first byte of b that is not c, -1 if none;
// it compares a page at a time.
func firstNot(b []byte, c byte) int {
	var page [4096]byte
	Fill(page[:], c)
	for at := 0; at < len(b); at += len(page) {
		chunk := b[at:min(len(b), at+len(page))]
		if bytes.Equal(chunk, page[:len(chunk)]) {
			continue
		}
		for i, x := range chunk {
			if x != c {
				return at + i
			}
		}
	}
	return -1
}

// Fill sets every byte of b to c.
func Fill(b []byte, c byte) {
	if len(b) == 0 {
		return
	}
	b[0] = c
	for i := 1; i < len(b); i *= 2 {
		copy(b[i:], b[:i])
	}
}

// Sizes are the transfer sizes of the put/get tests.
var Sizes = []int{0, 1, 4095, 4097, 64 << 10, 1 << 20, 16<<20 + 3}

// Guard is the room left around every target range.
const Guard = 256

// PutGet runs every size at an aligned and an unaligned offset, from one
// buffer and from a list, put then get, in a window of
// Sizes[len-1]+2*Guard bytes per rank.
func PutGet(p launch.Proc, w *rma.Window) error {
	seed := 0
	for _, n := range Sizes {
		for _, shift := range []int{0, 3} {
			for _, vec := range []bool{false, true} {
				seed++
				what := fmt.Sprintf("%d bytes, shift %d, list %v", n, shift, vec)
				if err := putCase(p, w, n, shift, vec, seed); err != nil {
					return fmt.Errorf("put of %s: %w", what, err)
				}
				if err := getCase(p, w, n, shift, vec, seed); err != nil {
					return fmt.Errorf("get of %s: %w", what, err)
				}
			}
		}
	}
	return nil
}

// split cuts b into a list of three unequal entries and an empty one.
func split(b []byte) [][]byte {
	a, c := len(b)/3, len(b)/3+len(b)/5
	return [][]byte{b[:a], nil, b[a:c], b[c:]}
}

func putCase(p launch.Proc, w *rma.Window, n, shift int, vec bool, seed int) error {
	if p.Rank == 1 {
		Fill(w.Local(), 0xA5)
	}
	if err := w.Fence(); err != nil {
		return err
	}
	if p.Rank == 0 {
		src := make([]byte, n+shift)[shift:]
		Pattern(src, seed)
		var op rma.Op
		var err error
		if vec {
			err = w.PutV(&op, 1, Guard+shift, split(src))
		} else {
			err = w.Put(&op, 1, Guard+shift, src)
		}
		if err != nil {
			return err
		}
		if err := w.Wait(&op); err != nil {
			return err
		}
	}
	if err := w.Fence(); err != nil {
		return err
	}
	if p.Rank == 1 {
		return CheckRange(w.Local(), Guard+shift, n, seed, 0xA5)
	}
	return nil
}

func getCase(p launch.Proc, w *rma.Window, n, shift int, vec bool, seed int) error {
	if p.Rank == 1 {
		Pattern(w.Local()[Guard+shift:Guard+shift+n], seed)
	}
	if err := w.Fence(); err != nil {
		return err
	}
	if p.Rank == 0 {
		buf := make([]byte, n+2*Guard)
		Fill(buf, 0x5A)
		dst := buf[Guard+shift : Guard+shift+n]
		var op rma.Op
		var err error
		if vec {
			err = w.GetV(&op, 1, Guard+shift, split(dst))
		} else {
			err = w.Get(&op, 1, Guard+shift, dst)
		}
		if err != nil {
			return err
		}
		if err := w.Wait(&op); err != nil {
			return err
		}
		if err := CheckRange(buf, Guard+shift, n, seed, 0x5A); err != nil {
			return err
		}
	}
	return w.Fence()
}

// NotifyLens are the lengths of the notification-order test's puts, up to
// 4 MiB, whose copy takes long enough for a notification sent too early to
// be seen first.
var NotifyLens = []int{0, 1, 8, 4095, 4097, 64 << 10, 1 << 20, 4 << 20}

// NotifyPuts is how many PutNotify the notification-order test starts.
const NotifyPuts = 32

// NotifyOffsets returns where each put of the notification-order test
// lands, and the window size it needs last.
func NotifyOffsets() []int {
	offs := make([]int, NotifyPuts+1)
	for i := range NotifyPuts {
		offs[i+1] = offs[i] + NotifyLens[i%len(NotifyLens)]
	}
	return offs
}

// NotifyOrder is the notification-order test of one rank: pipelined (every
// put in flight at once), then in lock-step (rank 1 waits in
// WaitNotification, polling, before each put starts, so that a
// notification sent before its data would be taken while the data is
// still being copied).
func NotifyOrder(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
	offs := NotifyOffsets()
	for _, lockstep := range []bool{false, true} {
		var err error
		if p.Rank == 0 {
			err = notifier(ep, w, lockstep, offs)
		} else {
			err = notified(ep, w, lockstep, offs)
		}
		if err != nil {
			return fmt.Errorf("lock-step %v: %w", lockstep, err)
		}
	}
	return nil
}

func notifier(ep *nemesis.Endpoint, w *rma.Window, lockstep bool, offs []int) error {
	ops := make([]rma.Op, len(offs)-1)
	for i := range ops {
		buf := make([]byte, NotifyLens[i%len(NotifyLens)])
		Pattern(buf, i)
		if lockstep {
			if _, err := ep.Recv(1, 1, nil); err != nil {
				return err
			}
		}
		if err := w.PutNotify(&ops[i], 1, offs[i], 1000+i, buf); err != nil {
			return err
		}
	}
	for i := range ops {
		if err := w.Wait(&ops[i]); err != nil {
			return err
		}
	}
	return w.Fence()
}

func notified(ep *nemesis.Endpoint, w *rma.Window, lockstep bool, offs []int) error {
	if lockstep {
		Fill(w.Local(), 0) // rank 0 waits for our first Send to put
	}
	for i := range len(offs) - 1 {
		if lockstep {
			if err := ep.Send(0, 1, nil); err != nil {
				return err
			}
		}
		n, err := w.WaitNotification(nemesis.AnySource, nemesis.AnyTag)
		if err != nil {
			return err
		}
		want := rma.Notification{Source: 0, Tag: 1000 + i, Offset: offs[i], Len: NotifyLens[i%len(NotifyLens)]}
		if n != want {
			return fmt.Errorf("notification %d: %+v, want %+v", i, n, want)
		}
		exp := make([]byte, n.Len)
		Pattern(exp, i)
		// The tail first: copies run front to back, and a checksum
		// from the front would trail the writer.
		got, tail := w.Local()[n.Offset:n.Offset+n.Len], max(0, n.Len-64)
		if !bytes.Equal(got[tail:], exp[tail:]) {
			return fmt.Errorf("notification %d (%d bytes): its last bytes are not there yet: data not visible before its notification", i, n.Len)
		}
		if CRC(got) != CRC(exp) {
			return fmt.Errorf("notification %d (%d bytes): data checksum %08x, want %08x: data not visible before its notification", i, n.Len, CRC(got), CRC(exp))
		}
	}
	if n, ok, err := w.Notification(nemesis.AnySource, nemesis.AnyTag); ok || err != nil {
		return fmt.Errorf("a notification more: %+v, %v", n, err)
	}
	return w.Fence()
}
