package shm

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// TestRingGeometryDiffers: two ranks whose lmt.Config asks for rings of
// different sizes open the same pair's ring. The second fails with the
// error naming both geometries, read before its mapping is gone (it used
// to read the geometry word after the unmap and die of SIGSEGV).
func TestRingGeometryDiffers(t *testing.T) {
	job := launch.NewJobName()
	first := &shm{env: &lmt.Env{Job: job, Rank: 0}, slots: 16, slotSize: 4096, poolSlots: 64}
	second := &shm{env: &lmt.Env{Job: job, Rank: 1}, slots: 32, slotSize: 8192, poolSlots: 128}
	r, err := first.open(0, 1, streamRing)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		unix.Munmap(r.mem)
		os.Remove(r.path)
	}()
	_, err = second.open(0, 1, streamRing)
	want := fmt.Sprintf("lmt: shm ring %s has 16 entries, pools of 64 slots of 4096 bytes; this rank wants 32, 128 of 8192 (lmt.Config differs between ranks)", r.path)
	if err == nil || err.Error() != want {
		t.Fatalf("second open: %v\nwant %s", err, want)
	}
}
