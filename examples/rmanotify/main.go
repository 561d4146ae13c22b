// Command rmanotify streams items from a producer (rank 0) to a consumer
// (rank 1) through a window of shared memory: the consumer's part holds
// four slots; the producer puts each item into the next slot with
// PutNotify, which writes the bytes and then tells the consumer where they
// are; the consumer reads the item in place, prints its checksum, and
// hands the slot back with a one-word message (a credit), so that the
// producer never overwrites an item not yet read.
package main

import (
	"context"
	"fmt"
	"hash/crc32"
	"log"

	"github.com/knemesis/knemesis"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/rma"
)

const (
	slots    = 4
	slotSize = 64 << 10
	items    = 12
	tagItem  = 1 // the notifications' tag
	tagSlot  = 2 // the credits' tag
)

func main() {
	if p, ok := launch.Self(); ok {
		if err := rank(p); err != nil {
			log.Fatalf("rank %d: %v", p.Rank, err)
		}
		return
	}
	if err := launch.Run(context.Background(), launch.Options{Procs: 2}); err != nil {
		log.Fatal(err)
	}
}

func rank(p launch.Proc) error {
	ep, err := knemesis.JoinProc(p, nil)
	if err != nil {
		return err
	}
	defer ep.Close()
	size := 0
	if p.Rank == 1 {
		size = slots * slotSize
	}
	w, err := rma.Allocate(ep, size, nil) // collective; the consumer's part holds the slots
	if err != nil {
		return err
	}
	if p.Rank == 0 {
		err = produce(ep, w)
	} else {
		err = consume(ep, w)
	}
	if err != nil {
		return err
	}
	return w.Free()
}

// item k's length and contents.
func item(k int) []byte {
	b := make([]byte, 1024<<(k%7))
	for i := range b {
		b[i] = byte(i*31 + k)
	}
	return b
}

func produce(ep *knemesis.Endpoint, w *rma.Window) error {
	var op rma.Op
	credit := []int64{0}
	for k := range items {
		slot := k % slots
		if k >= slots { // the slot's previous item must have been read
			if _, err := knemesis.Recv(ep, 1, tagSlot, credit); err != nil {
				return err
			}
			if credit[0] != int64(slot) {
				return fmt.Errorf("item %d: slot %d handed back, want %d", k, credit[0], slot)
			}
		}
		if err := w.PutNotify(&op, 1, slot*slotSize, tagItem, item(k)); err != nil {
			return err
		}
		if err := w.Wait(&op); err != nil {
			return err
		}
	}
	for range min(slots, items) { // the last credits
		if _, err := knemesis.Recv(ep, 1, tagSlot, credit); err != nil {
			return err
		}
	}
	return nil
}

func consume(ep *knemesis.Endpoint, w *rma.Window) error {
	for k := range items {
		n, err := w.WaitNotification(0, tagItem)
		if err != nil {
			return err
		}
		got := w.Local()[n.Offset : n.Offset+n.Len] // read in place: no copy
		sum := crc32.ChecksumIEEE(got)
		fmt.Printf("item %2d: %5d bytes in slot %d, crc32 %08x\n", k, n.Len, n.Offset/slotSize, sum)
		if want := crc32.ChecksumIEEE(item(k)); sum != want {
			return fmt.Errorf("item %d arrived with crc32 %08x, sent with %08x", k, sum, want)
		}
		if err := knemesis.Send(ep, 0, tagSlot, []int64{int64(n.Offset / slotSize)}); err != nil {
			return err
		}
	}
	return nil
}
