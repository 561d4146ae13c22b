package nemesis

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/nemesis/launch/launchtest"
)

// TestJoinFailsAtOnceWhenCreatorDies: rank 0 creates the segment and dies
// once rank 1 has joined, while rank 2 never joins. Rank 1, whose
// JoinTimeout is an hour, fails at once with ErrPeerDead naming both the
// dead creator and the rank it was waiting for: a dead creator is never
// waited out.
func TestJoinFailsAtOnceWhenCreatorDies(t *testing.T) {
	launchtest.RunOpts(t, 3, launchtest.Options{ExitEarly: []int{0}}, func(p launch.Proc) error {
		switch p.Rank {
		case 0:
			k, err := keyOf(&Options{}) // the launcher's, as Join takes it
			if err != nil {
				return err
			}
			s, err := createSegment("/dev/shm", segmentName(p.Job, k, &Options{}, 0), (&Options{}).layout(p.Size), k)
			if err != nil {
				return err
			}
			s.proc(0).pid.Store(int32(os.Getpid()))
			s.hdr.joined.Add(1)
			for s.proc(1).pid.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			os.Exit(0) // dies with rank 2 still missing
		case 1:
			_, err := Join(p.Job, 1, p.Size, &Options{JoinTimeout: time.Hour})
			if !errors.Is(err, ErrPeerDead) || !strings.Contains(err.Error(), "rank 0, which created the segment, died") ||
				!strings.Contains(err.Error(), "rank 2 had not joined") {
				return fmt.Errorf("Join with its creator dead: %v, want ErrPeerDead naming rank 0 and rank 2", err)
			}
			// Nobody unlinked the name: not every rank joined.
			k, err := keyOf(&Options{})
			if err != nil {
				return err
			}
			return fdpass.RemoveDir(segPath("/dev/shm", segmentName(p.Job, k, &Options{}, 0)), segObject)
		}
		return nil // rank 2 never joins
	})
}

// TestJoinStallNamesRankAndWait: a job whose last rank never comes fails
// its joined ranks once no rank has joined for JoinTimeout, each naming
// itself, the missing rank and how far the join came.
func TestJoinStallNamesRankAndWait(t *testing.T) {
	job := launch.NewJobName()
	const stall = 200 * time.Millisecond
	res := make(chan error, 2)
	for r := range 2 {
		go func() {
			_, err := Join(job, r, 3, &Options{JoinTimeout: stall})
			res <- err
		}()
	}
	for range 2 {
		err := <-res
		if !errors.Is(err, ErrJoinTimeout) || !strings.Contains(err.Error(), "waited for rank 2 of job") ||
			!strings.Contains(err.Error(), "2 of 3 ranks joined, and none more for 200ms") {
			t.Errorf("Join with rank 2 missing: %v, want ErrJoinTimeout naming rank 2 and 2 of 3 joined", err)
		}
	}
	if _, err := os.Stat(segPath("/dev/shm", job)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("segment after a failed join: %v, want it gone", err)
	}
}

// TestCreatorWatch: a rank waiting for the segment sees the CPU time grow
// of the process serving the job's name while it works, and nothing of a
// creator that is gone (its socket left, nobody listening).
func TestCreatorWatch(t *testing.T) {
	dir := t.TempDir()
	path := segPath(dir, "watch")
	w := creatorWatch{path: path}
	if got := w.progress(); got != 0 {
		t.Fatalf("no creator: progress %d, want 0", got)
	}
	srv, err := fdpass.Listen(path, segObject)
	if err != nil {
		t.Fatal(err)
	}
	w.looked = time.Time{}
	first := w.progress()
	for w.looked = (time.Time{}); w.progress() == first; w.looked = (time.Time{}) {
		spin() // work, as a creator filling the segment
	}
	if first == 0 {
		t.Fatalf("a live creator shows no CPU time")
	}
	srv.Close()
	leaveSegment(t, dir, "watch")
	w.looked = time.Time{}
	if got := w.progress(); got != 0 {
		t.Fatalf("a creator that is gone: progress %d, want 0", got)
	}
}

var spinSink uint64

// spin burns about a clock tick of CPU time.
func spin() {
	x := spinSink
	for i := range uint64(1e7) {
		x = x*6364136223846793005 + i
	}
	spinSink = x
}
