package shm

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// TestRingGeometryDiffers: two ranks whose lmt.Config asks for different
// geometries open the same pair's ring, which the sender made. With
// rings of the same size (pools of another number of slots), the sender
// fails with the error naming both geometries, read before its mapping is
// gone (it used to read the geometry word after the unmap and die of
// SIGSEGV); with rings of other sizes, the handover refuses the memfd for
// its size before anything is mapped.
func TestRingGeometryDiffers(t *testing.T) {
	job := launch.NewJobName()
	dir := launch.JobDir(job)
	geom := func(slots, slotSize, poolSlots int) lmt.Config {
		return lmt.Config{ShmSlots: slots, ShmSlotSize: slotSize, ShmPoolSlots: poolSlots}
	}
	maker := servedShm(t, job, dir, jobkey.Key{}, 0, geom(16, 4096, 64))
	r, err := maker.open(0, 1, streamRing)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(r.mem)
	pools := servedShm(t, job, dir, jobkey.Key{}, 1, geom(16, 4096, 128))
	_, err = pools.open(0, 1, streamRing)
	want := "lmt: shm lmt ring from rank 0 to rank 1 has 16 entries, pools of 64 slots of 4096 bytes; this rank wants 16, 128 of 4096 (lmt.Config differs between ranks)"
	if err == nil || err.Error() != want {
		t.Fatalf("receiver with pools of another size: %v\nwant %s", err, want)
	}
	slots := &shm{env: pools.env, slots: 32, slotSize: 8192, poolSlots: 64}
	_, err = slots.open(0, 1, streamRing)
	var e *fdpass.Error
	if !errors.As(err, &e) || e.Kind != fdpass.ErrBadFile || e.Reason != fmt.Sprintf("it is %d bytes, want %d", ringSize(16, 4096), ringSize(32, 8192)) {
		t.Fatalf("receiver with rings of another size: %v, want fdpass.ErrBadFile for the size", err)
	}
}
