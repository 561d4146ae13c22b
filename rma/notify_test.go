package rma_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
)

// TestNotifyOrder: rank 0 starts 32 PutNotify of mixed sizes (up to 4 MiB,
// whose copy takes long enough for a notification sent too early to be
// seen first) into distinct slots of rank 1, all in flight at once. Rank 1 takes the notifications
// one by one: each must come in the order of the calls, name its slot, and
// find the slot's bytes already there, checked by checksum at the moment
// the notification is taken.
func TestNotifyOrder(t *testing.T) {
	const puts = 32
	lens := []int{0, 1, 8, 4095, 4097, 64 << 10, 1 << 20, 4 << 20}
	offs := make([]int, puts+1)
	for i := range puts {
		offs[i+1] = offs[i] + lens[i%len(lens)]
	}
	for _, k := range kinds(t) {
		t.Run(k.name, func(t *testing.T) {
			run(t, 2, k, offs[puts], func(p launch.Proc, ep *nemesis.Endpoint, w *rma.Window) error {
				// Pipelined: every put in flight at once. Lock-step: rank 1
				// waits in WaitNotification, polling, before each put
				// starts, so that a notification sent before its data
				// would be taken while the data is still being copied.
				for _, lockstep := range []bool{false, true} {
					var err error
					if p.Rank == 0 {
						err = notifier(ep, w, lockstep, offs, lens)
					} else {
						err = notified(ep, w, lockstep, offs, lens)
					}
					if err != nil {
						return fmt.Errorf("lock-step %v: %w", lockstep, err)
					}
				}
				return nil
			})
		})
	}
}

func notifier(ep *nemesis.Endpoint, w *rma.Window, lockstep bool, offs, lens []int) error {
	ops := make([]rma.Op, len(offs)-1)
	for i := range ops {
		buf := make([]byte, lens[i%len(lens)])
		pattern(buf, i)
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

func notified(ep *nemesis.Endpoint, w *rma.Window, lockstep bool, offs, lens []int) error {
	if lockstep {
		fill(w.Local(), 0) // rank 0 waits for our first Send to put
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
		want := rma.Notification{Source: 0, Tag: 1000 + i, Offset: offs[i], Len: lens[i%len(lens)]}
		if n != want {
			return fmt.Errorf("notification %d: %+v, want %+v", i, n, want)
		}
		exp := make([]byte, n.Len)
		pattern(exp, i)
		// The tail first: copies run front to back, and a checksum
		// from the front would trail the writer.
		got, tail := w.Local()[n.Offset:n.Offset+n.Len], max(0, n.Len-64)
		if !bytes.Equal(got[tail:], exp[tail:]) {
			return fmt.Errorf("notification %d (%d bytes): its last bytes are not there yet: data not visible before its notification", i, n.Len)
		}
		if crc(got) != crc(exp) {
			return fmt.Errorf("notification %d (%d bytes): data checksum %08x, want %08x: data not visible before its notification", i, n.Len, crc(got), crc(exp))
		}
	}
	if n, ok, err := w.Notification(nemesis.AnySource, nemesis.AnyTag); ok || err != nil {
		return fmt.Errorf("a notification more: %+v, %v", n, err)
	}
	return w.Fence()
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
