package rma

import (
	"errors"
	"testing"

	"github.com/knemesis/knemesis/nemesis"
	"github.com/knemesis/knemesis/peerfault"
)

// FuzzNotifyRecord writes one record of a window's notification ring as a
// producer would (its stamp last) and takes it as the target does: what
// checkNote accepts names a rank of the job other than the target, a
// valid tag, and bytes inside the target's part; what it refuses is
// ErrCorrupt, and a *peerfault.Error naming the producer when the stamp
// names one.
func FuzzNotifyRecord(f *testing.F) {
	const size, part = 4, 4096
	f.Add(uint64(stampPublish|1), uint64(5), uint64(0), uint64(8))
	f.Add(uint64(stampPublish|1), uint64(5), uint64(part-4), uint64(8))
	f.Add(uint64(stampPublish|1), uint64(5), uint64(1<<63), uint64(1<<63))
	f.Add(uint64(stampPublish|7), uint64(5), uint64(0), uint64(8))
	f.Add(uint64(stampPublish), uint64(5), uint64(0), uint64(8))
	f.Add(uint64(stampPublish|2), uint64(1<<40), uint64(0), uint64(0))
	f.Add(uint64(1), uint64(5), uint64(0), uint64(8))
	f.Fuzz(func(t *testing.T, stamp, tag, off, n uint64) {
		r := newRing()
		s := &r.slots[0]
		s.tag, s.off, s.n = tag, off, n
		s.stamp.Store(stamp &^ (1<<64 - 1<<32)) // lap 0: where the target looks first
		note, ok := r.take()
		if !ok {
			return
		}
		w := &Window{e: &engine{size: size, rank: 0}, local: make([]byte, part)}
		err := w.checkNote(&note)
		if err != nil {
			var pe *peerfault.Error
			if !errors.Is(err, ErrCorrupt) || errors.As(err, &pe) && (pe.Rank != note.Source || pe.Field == "") {
				t.Fatalf("%+v refused with %v", note, err)
			}
			return
		}
		if note.Source <= 0 || note.Source >= size || note.Tag < 0 || note.Tag > nemesis.MaxTag ||
			note.Offset < 0 || note.Len < 0 || note.Offset+note.Len > part {
			t.Fatalf("accepted %+v for a %d-byte part in a job of %d", note, part, size)
		}
	})
}
