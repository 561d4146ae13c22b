package shm

import (
	"errors"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/otheruser"
	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/shmfile"
)

// ringShm is the backend of rank 0 of a job of two with key, enough to
// open its rings.
func ringShm(t *testing.T, key jobkey.Key) *shm {
	cfg := lmt.Config{Rank: 0, Size: 2, Job: launch.NewJobName(), Key: key}
	c := cfg.WithDefaults()
	return &shm{env: &lmt.Env{Rank: 0, Size: 2, Job: cfg.Job, Key: key, Config: &c}, slots: uint64(c.ShmSlots), slotSize: c.ShmSlotSize, poolSlots: c.ShmPoolSlots}
}

// TestOtherUserAndTheRing: another user that made a file, or a link, at
// the name of a job's ring (which it could only guess for a job without
// a key) has it refused by the rank that comes to open it, with the
// *shmfile.Error naming the ring, the owner and why; the link's target
// is not truncated. A ring the job made is mode 0600 and the other user
// can neither read it, open it for writing nor truncate it. With a key,
// the ring's name carries the key's part.
func TestOtherUserAndTheRing(t *testing.T) {
	otheruser.Require(t)
	key, err := jobkey.New()
	if err != nil {
		t.Fatal(err)
	}
	s := ringShm(t, key)
	path := ringPath(s.env, streamRing, 0, 1)
	if want := "/dev/shm/knemesis-" + s.env.Job + "-lmt-0-1-" + key.Name("lmt/shm-ring"); path != want {
		t.Fatalf("ring path %s, want %s", path, want)
	}
	refused := func(why string) {
		t.Helper()
		_, err := s.open(0, 1, streamRing)
		var e *shmfile.Error
		if !errors.As(err, &e) || e.Object != "shm lmt ring from rank 0 to rank 1" || e.Path != path || e.Owner != otheruser.UID || !strings.Contains(e.Reason, why) {
			t.Fatalf("opening a ring another user made: %v, want the *shmfile.Error naming the ring, uid %d and %q", err, otheruser.UID, why)
		}
	}
	otheruser.Precreate(t, path)
	refused("belongs to uid 61234")
	if b, _ := os.ReadFile(path); string(b) != "squatter" {
		t.Fatalf("the other user's file holds %q, want its own bytes", b)
	}
	os.Remove(path)

	target := path + ".target"
	if err := os.WriteFile(target, []byte("ours"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(target)
	otheruser.Symlink(t, target, path)
	refused("symbolic link")
	if b, _ := os.ReadFile(target); string(b) != "ours" {
		t.Fatalf("the link's target holds %q, want %q", b, "ours")
	}
	os.Remove(path)

	r, err := s.open(0, 1, streamRing)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(r.mem)
	defer unix.Unlink(r.path)
	var st unix.Stat_t
	if err := unix.Stat(r.path, &st); err != nil || st.Mode != unix.S_IFREG|0o600 {
		t.Fatalf("the job's ring: %v, mode %#o; want a regular file of mode 0600", err, st.Mode)
	}
	otheruser.Refused(t, r.path)
}
