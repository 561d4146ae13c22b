package shm

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/internal/otheruser"
	"github.com/knemesis/knemesis/jobkey"
	"github.com/knemesis/knemesis/lmt"
	"github.com/knemesis/knemesis/nemesis/launch"
)

// servedShm is the backend of rank of a job of two with key and
// geometry c, serving on its handover socket in the job's directory dir
// (as newShm does, without a pool): enough to make, serve and receive its
// rings in one process.
func servedShm(t *testing.T, job, dir string, key jobkey.Key, rank int, c lmt.Config) *shm {
	t.Helper()
	env := &lmt.Env{Rank: rank, Size: 2, Job: job, Key: key, Config: &c}
	env.Dir = dir
	srv, err := listenIn(poolDir(env, rank), poolObject(rank))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(); os.Remove(dir) })
	return &shm{env: env, srv: srv, slots: uint64(c.ShmSlots), slotSize: c.ShmSlotSize, poolSlots: c.ShmPoolSlots}
}

// ringPair is the two backends of a job of two, with the default
// geometry, in a fresh job directory.
func ringPair(t *testing.T, key jobkey.Key) (sender, receiver *shm) {
	t.Helper()
	job := launch.NewJobName()
	c := (&lmt.Config{Rank: 0, Size: 2, Job: job, Key: key}).WithDefaults()
	dir := launch.JobDir(job)
	return servedShm(t, job, dir, key, 0, c), servedShm(t, job, dir, key, 1, c)
}

// openPair maps the ring of kind from snd's rank to rcv's in both, its
// owner first (ringOwner), as the engines do.
func openPair(t *testing.T, snd, rcv *shm, kind string) (out, in *ring) {
	t.Helper()
	first, second := snd, rcv
	if ringOwner(kind, snd.env.Rank, rcv.env.Rank) == rcv.env.Rank {
		first, second = rcv, snd
	}
	a, err := first.open(snd.env.Rank, rcv.env.Rank, kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(a.mem) })
	b, err := second.open(snd.env.Rank, rcv.env.Rank, kind)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b.mem) })
	if first == snd {
		return a, b
	}
	return b, a
}

// TestOtherUserAndTheRing: the rings have no name in /dev/shm any more.
// Another user that made a file at the name a ring had there (with the
// job's key part, which it could only guess), and a link at the rail
// ring's to a file of the job's user, sees neither touched: the owner
// of each ring makes it as a memfd and serves it, the other side receives
// it, and bytes written by the sender are read by the receiver. The other
// user cannot reach either rank's socket (read, open for writing or
// truncate: Permission denied), and /dev/shm holds nothing of the job
// but those names.
func TestOtherUserAndTheRing(t *testing.T) {
	otheruser.Require(t)
	key, err := jobkey.New()
	if err != nil {
		t.Fatal(err)
	}
	snd, rcv := ringPair(t, key)
	job := snd.env.Job
	oldName := func(kind string) string {
		return "/dev/shm/knemesis-" + job + "-" + kind + "-0-1-" + key.Name("lmt/shm-ring")
	}
	otheruser.Precreate(t, oldName(streamRing))
	defer os.Remove(oldName(streamRing))
	target := oldName(railRing) + ".target"
	if err := os.WriteFile(target, []byte("ours"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(target)
	otheruser.Symlink(t, target, oldName(railRing))
	defer os.Remove(oldName(railRing))
	for _, kind := range []string{streamRing, railRing} {
		out, in := openPair(t, snd, rcv, kind)
		out.written.Store(3)
		out.data[0] = 0x5a
		if in.written.Load() != 3 || in.data[0] != 0x5a {
			t.Fatalf("%s ring: the receiver reads written %d, data %#x; want 3 and 0x5a from the sender", kind, in.written.Load(), in.data[0])
		}
	}
	if b, _ := os.ReadFile(oldName(streamRing)); string(b) != "squatter" {
		t.Fatalf("the other user's file holds %q, want its own bytes", b)
	}
	if b, _ := os.ReadFile(target); string(b) != "ours" {
		t.Fatalf("the link's target holds %q, want %q", b, "ours")
	}
	otheruser.Refused(t, fdpass.SocketPath(poolDir(snd.env, 0)))
	otheruser.Refused(t, fdpass.SocketPath(poolDir(rcv.env, 1)))
	m, _ := filepath.Glob("/dev/shm/knemesis-" + job + "-*")
	want := []string{oldName(streamRing), oldName(railRing), target}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Fatalf("/dev/shm holds %q of the job, want only the other user's two names and the link's target %q", m, want)
	}
}
