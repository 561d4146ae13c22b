package rma_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
	"github.com/knemesis/knemesis/rma"
	"github.com/knemesis/knemesis/rma/internal/rmatest"
)

// TestNotifyOrder: rank 0 starts 32 PutNotify of mixed sizes (up to 4 MiB)
// into distinct slots of rank 1, first all in flight at once, then in
// lock-step with rank 1 polling before each. Rank 1 takes the
// notifications one by one: each must come in the order of the calls,
// name its slot, and find the slot's bytes already there (the last ones
// first, then all by checksum) at the moment it is taken.
func TestNotifyOrder(t *testing.T) {
	offs := rmatest.NotifyOffsets()
	for _, k := range kinds(t) {
		t.Run(k.Name, func(t *testing.T) {
			run(t, 2, k, offs[len(offs)-1], rmatest.NotifyOrder)
		})
	}
}

// TestNotifyMatch: notifications are taken by source and tag, the oldest
// matching first, leaving the others queued.
func TestNotifyMatch(t *testing.T) {
	run(t, 3, allocated, 64, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
		if p.Rank != 0 {
			var op rma.Op
			for _, tag := range []int{7, 8} {
				if err := w.PutNotify(&op, 0, 8*p.Rank, tag, []byte{byte(p.Rank)}); err != nil {
					return err
				}
				if err := w.Wait(&op); err != nil {
					return err
				}
			}
			return w.Fence()
		}
		seen := map[[2]int]bool{}
		for _, want := range []struct{ src, tag int }{{2, 8}, {1, 8}, {nemesis.AnySource, 7}, {nemesis.AnySource, nemesis.AnyTag}} {
			n, err := w.WaitNotification(want.src, want.tag)
			if err != nil {
				return err
			}
			if want.src != nemesis.AnySource && n.Source != want.src || want.tag != nemesis.AnyTag && n.Tag != want.tag || seen[[2]int{n.Source, n.Tag}] {
				return fmt.Errorf("asked for source %d tag %d, got %+v (taken before: %v)", want.src, want.tag, n, seen)
			}
			seen[[2]int{n.Source, n.Tag}] = true
			if w.Local()[n.Offset] != byte(n.Source) {
				return fmt.Errorf("notification %+v: byte %d, want %d", n, w.Local()[n.Offset], n.Source)
			}
		}
		if err := w.Fence(); err != nil {
			return err
		}
		if _, ok, _ := w.Notification(nemesis.AnySource, nemesis.AnyTag); ok {
			return fmt.Errorf("a fifth notification, of four sent")
		}
		return nil
	})
}

// ringNote is the i-th notification origin src sends in the ring tests: a
// put of 1 to 64 bytes at its own 64-byte slot of the target's part (which
// holds 64×perSrc bytes per rank of the job), the bytes a pattern of (src,
// i), the tag i.
func ringNote(src, i, perSrc int) (off int, data []byte) {
	data = make([]byte, 1+(i*7)%64)
	pattern(data, src*100000+i)
	return 64 * (src*perSrc + i), data
}

// checkRingNote checks that n is origin src's i-th notification and that
// its bytes are in w's part, by checksum, when it is taken.
func checkRingNote(w *rma.Window, n rma.Notification, src, i, perSrc int) error {
	off, data := ringNote(src, i, perSrc)
	want := rma.Notification{Source: src, Tag: i, Offset: off, Len: len(data)}
	if n != want {
		return fmt.Errorf("notification %+v, want %+v", n, want)
	}
	if got := crc(w.Local()[off : off+len(data)]); got != crc(data) {
		return fmt.Errorf("notification %+v: data checksum %08x, want %08x: data not visible before its notification", n, got, crc(data))
	}
	return nil
}

// TestNotifyRingFull: rank 0 starts more PutNotify toward rank 1 than its
// ring holds while rank 1 takes none (it does not even poll): exactly
// RingSlots complete, the others wait in order, and Free is refused
// naming them. Then rank 1 takes them all, and more, three laps around
// the ring: each in order, its data there by checksum.
func TestNotifyRingFull(t *testing.T) {
	const total, held = 3*rma.RingSlots + 7, rma.RingSlots + 10
	run(t, 2, allocated, 64*2*total, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
		if p.Rank == 1 {
			return takeRingNotes(w, total)
		}
		ops := make([]rma.Op, total)
		start := func(i int) error {
			off, data := ringNote(0, i, total)
			return w.PutNotify(&ops[i], 1, off, i, data)
		}
		// Rank 1 polls no more once it says so (its word at 8; the
		// notes' data at 0 is one byte): none of its polls drains
		// the ring behind our back.
		var word [8]byte
		for binary.LittleEndian.Uint64(word[:]) != 1 {
			if err := w.Get(&ops[0], 1, 8, word[:]); err != nil {
				return err
			}
			if err := w.Wait(&ops[0]); err != nil {
				return err
			}
		}
		for i := range held {
			if err := start(i); err != nil {
				return err
			}
		}
		for i := range held {
			done, err := w.Test(&ops[i])
			if err != nil || done != (i < rma.RingSlots) {
				return fmt.Errorf("PutNotify %d of %d, none taken: done %v (%v), want %v", i, held, done, err, i < rma.RingSlots)
			}
		}
		if err := w.Free(); !errors.Is(err, rma.ErrInFlight) || !strings.Contains(err.Error(), fmt.Sprintf("%d operations", held-rma.RingSlots)) {
			return fmt.Errorf("Free with %d PutNotify waiting for a full ring: %v, want ErrInFlight naming them", held-rma.RingSlots, err)
		}
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&w.Local()[0])), 1) // rank 1 may take now
		for i := held; i < total; i++ {
			if err := start(i); err != nil {
				return err
			}
		}
		for i := range ops {
			if err := w.Wait(&ops[i]); err != nil {
				return fmt.Errorf("PutNotify %d: %w", i, err)
			}
		}
		return w.Fence()
	})
}

// takeRingNotes is rank 1 of TestNotifyRingFull: it says in its part that
// it polls no more, waits without polling the endpoint until rank 0 says
// so in its own part, then takes every notification.
func takeRingNotes(w *rma.Window, total int) error {
	var op rma.Op
	var word [8]byte
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&w.Local()[8])), 1) // no poll from here on
	for binary.LittleEndian.Uint64(word[:]) != 1 {
		time.Sleep(time.Millisecond)
		// A get on an allocated window completes where it starts:
		// no poll, so the ring is not drained behind rank 0's back.
		if err := w.Get(&op, 0, 0, word[:]); err != nil {
			return err
		}
		if err := w.Wait(&op); err != nil {
			return err
		}
	}
	for i := range total {
		n, err := w.WaitNotification(0, nemesis.AnyTag)
		if err != nil {
			return err
		}
		if err := checkRingNote(w, n, 0, i, total); err != nil {
			return err
		}
	}
	if n, ok, err := w.Notification(nemesis.AnySource, nemesis.AnyTag); ok || err != nil {
		return fmt.Errorf("a notification more: %+v, %v", n, err)
	}
	return w.Fence()
}

// TestNotifyContention: ranks 1, 2 and 3 each send 150 PutNotify to rank
// 0 at once, through its one ring of RingSlots. Rank 0 takes mostly with
// wildcards, and every fifth time the next one of a given source and tag,
// which sets the others aside: every notification comes once, in its
// origin's order, its data there by checksum.
func TestNotifyContention(t *testing.T) {
	const ranks, perSrc = 4, 150
	run(t, ranks, allocated, 64*ranks*perSrc, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
		if p.Rank != 0 {
			var op rma.Op
			for i := range perSrc {
				off, data := ringNote(p.Rank, i, perSrc)
				if err := w.PutNotify(&op, 0, off, i, data); err != nil {
					return err
				}
				if err := w.Wait(&op); err != nil {
					return err
				}
			}
			return w.Fence()
		}
		next := make([]int, ranks)
		for j := range (ranks - 1) * perSrc {
			src, tag := nemesis.AnySource, nemesis.AnyTag
			if s := 1 + j%(ranks-1); j%5 == 0 && next[s] < perSrc {
				src, tag = s, next[s]
			}
			n, err := w.WaitNotification(src, tag)
			if err != nil {
				return err
			}
			if n.Source < 1 || n.Source >= ranks || src != nemesis.AnySource && n.Source != src {
				return fmt.Errorf("take %d (source %d, tag %d): %+v", j, src, tag, n)
			}
			if err := checkRingNote(w, n, n.Source, next[n.Source], perSrc); err != nil {
				return fmt.Errorf("take %d (source %d, tag %d): %w", j, src, tag, err)
			}
			next[n.Source]++
		}
		if err := w.Fence(); err != nil {
			return err
		}
		if n, ok, err := w.Notification(nemesis.AnySource, nemesis.AnyTag); ok || err != nil {
			return fmt.Errorf("a notification more: %+v, %v", n, err)
		}
		return nil
	})
}

// TestNotifyDeadOrigin: rank 1 sends three notifications to rank 0, then
// dies in the middle of a fourth, holding a position of rank 0's ring;
// rank 2 sends two after its death. Rank 0 takes rank 1's three; then
// the waits that meet the held position, for any source and for rank 2,
// fail naming rank 1 (the position is not skipped: its holder could be a
// live rank slow to write it), and so does a wait for rank 1. None hangs.
func TestNotifyDeadOrigin(t *testing.T) {
	const perSrc = 3
	launchtest.RunOpts(t, 3, launchtest.Options{ExitEarly: []int{1}}, func(p launch.Proc) error {
		ep, err := nemesis.JoinProc(p, nil)
		if err != nil {
			return err
		}
		w, err := rma.Allocate(ep, 64*3*perSrc, nil)
		if err != nil {
			return err
		}
		if err := w.Fence(); err != nil {
			return err
		}
		var op rma.Op
		send := func(n int) error {
			for i := range n {
				off, data := ringNote(p.Rank, i, perSrc)
				if err := w.PutNotify(&op, 0, off, i, data); err != nil {
					return err
				}
				if err := w.Wait(&op); err != nil {
					return err
				}
			}
			return nil
		}
		switch p.Rank {
		case 1:
			if err := send(perSrc); err != nil {
				return err
			}
			if !w.ReserveNotification(0) {
				return fmt.Errorf("rank 0's ring full after %d notifications", perSrc)
			}
			os.Exit(0) // dies in the middle of a PutNotify
		case 2:
			pid, _ := ep.PeerPID(1)
			for unix.Kill(pid, 0) == nil {
				time.Sleep(time.Millisecond)
			}
			if err := send(2); err != nil {
				return err
			}
			_, err := ep.Recv(0, 9, nil) // rank 0 is done
			return errors.Join(err, ep.Close())
		}
		for i := range perSrc {
			n, err := w.WaitNotification(nemesis.AnySource, nemesis.AnyTag)
			if err == nil {
				err = checkRingNote(w, n, 1, i, perSrc)
			}
			if err != nil {
				return fmt.Errorf("rank 1's notification %d: %w", i, err)
			}
		}
		const want = "taken and not written for 1s"
		for _, src := range []int{nemesis.AnySource, 2, 1} {
			var te *rma.TargetError
			n, err := w.WaitNotification(src, nemesis.AnyTag)
			if !errors.As(err, &te) || te.Rank != 1 || src != 1 && !strings.Contains(err.Error(), want) {
				return fmt.Errorf("wait for source %d behind the position rank 1 died holding: %+v, %v; want a TargetError naming rank 1", src, n, err)
			}
		}
		if err := ep.Send(2, 9, nil); err != nil {
			return err
		}
		if err := w.Free(); !errors.As(err, new(*rma.TargetError)) {
			return fmt.Errorf("Free with rank 1 gone: %v, want a TargetError", err)
		}
		return ep.Close()
	})
}

// TestNotifyNoAllocs: a PutNotify on an allocated window and its
// WaitNotification, with a caller-owned Op, allocate nothing, on either
// side, over more round trips than the ring holds.
func TestNotifyNoAllocs(t *testing.T) {
	run(t, 2, allocated, 64, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
		buf := make([]byte, 8)
		var op rma.Op
		var err error
		allocs := testing.AllocsPerRun(2*rma.RingSlots, func() {
			if err != nil {
				return
			}
			if p.Rank == 1 {
				_, err = w.WaitNotification(0, nemesis.AnyTag)
				return
			}
			if err = w.PutNotify(&op, 1, 0, 5, buf); err == nil {
				err = w.Wait(&op)
			}
		})
		if err != nil {
			return err
		}
		if allocs != 0 {
			return fmt.Errorf("rank %d: %v allocations a PutNotify or WaitNotification, want 0", p.Rank, allocs)
		}
		return w.Fence()
	})
}

// monotonic is CLOCK_MONOTONIC, the same clock in every process.
func monotonic() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// TestNotifyWakesDozers: no packet carries a ring's notification nor the
// room a take makes, so the ring must wake the rank that dozes on them.
// Rank 1 waits for a notification that comes a second later, long enough
// to doze; then rank 0 waits for room in a full ring that rank 1, silent
// for a second, makes with one take and nothing else for a second more.
// Each waiter must have dozed, and a waker, not the end of a nap, must
// have ended one of its dozes (Stats.Woken).
func TestNotifyWakesDozers(t *testing.T) {
	const quiet = time.Second
	woken := func(ep *nemesis.Endpoint, what string, before nemesis.Stats) error {
		st := ep.Stats()
		if st.Dozes == before.Dozes || st.Woken == before.Woken {
			return fmt.Errorf("%s: %d dozes, %d ended by a wake-up; want at least one of each", what, st.Dozes-before.Dozes, st.Woken-before.Woken)
		}
		return nil
	}
	run(t, 2, allocated, 4096, func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
		var op rma.Op
		var stamp [8]byte
		if p.Rank == 1 {
			before := ep.Stats()
			if _, err := w.WaitNotification(0, nemesis.AnyTag); err != nil {
				return err
			}
			if err := woken(ep, "a target waiting for a notification", before); err != nil {
				return err
			}
			atomic.StoreUint64((*uint64)(unsafe.Pointer(&w.Local()[8])), 1) // no poll from here on
			time.Sleep(quiet)
			if err := w.Put(&op, 0, 0, stamp[:]); err != nil {
				return err
			}
			if _, err := w.WaitNotification(0, nemesis.AnyTag); err != nil {
				return err
			}
			time.Sleep(quiet)
			for range rma.RingSlots {
				if _, err := w.WaitNotification(0, nemesis.AnyTag); err != nil {
					return err
				}
			}
			return w.Fence()
		}
		time.Sleep(quiet)
		if err := w.PutNotify(&op, 1, 0, 1, stamp[:]); err != nil {
			return err
		}
		if err := w.Wait(&op); err != nil {
			return err
		}
		for binary.LittleEndian.Uint64(stamp[:]) != 1 {
			if err := w.Get(&op, 1, 8, stamp[:]); err != nil {
				return err
			}
			if err := w.Wait(&op); err != nil {
				return err
			}
		}
		ops := make([]rma.Op, rma.RingSlots+1)
		for i := range ops {
			if err := w.PutNotify(&ops[i], 1, 16, 2, nil); err != nil {
				return err
			}
		}
		before := ep.Stats()
		if err := w.Wait(&ops[rma.RingSlots]); err != nil {
			return err
		}
		if err := woken(ep, "a writer waiting for room in a full ring", before); err != nil {
			return err
		}
		return w.Fence()
	})
}
