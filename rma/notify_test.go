package rma_test

import (
	"fmt"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
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
