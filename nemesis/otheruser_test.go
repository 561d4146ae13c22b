package nemesis

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/knemesis/knemesis/internal/fdpass"
	"github.com/knemesis/knemesis/internal/otheruser"
	"github.com/knemesis/knemesis/nemesis/launch"
	"github.com/knemesis/knemesis/shmfile"
)

// The attacks of another user of the node on a job's segment: a throwaway
// uid (internal/otheruser) squats the segment's name, puts a link there,
// and tries to read, open and shrink a live segment. Each is refused with
// its error, and nothing of the job reaches the other user.

// wantForeign fails t unless err is the *shmfile.Error refusing the
// segment at path, made by the other user, for reason.
func wantForeign(t *testing.T, err error, path, reason string) {
	t.Helper()
	var e *shmfile.Error
	if !errors.As(err, &e) || e.Object != segObject || e.Path != path || e.Owner != otheruser.UID || !strings.Contains(e.Reason, reason) {
		t.Fatalf("%v: want the *shmfile.Error of the nemesis segment %s, owner %d, because %q", err, path, otheruser.UID, reason)
	}
}

// TestOtherUserSquatsSegment: a file the other user made at the
// segment's name is adopted neither by the creator nor by a joiner, with a
// key or without (the name is then the job's, which anyone may guess).
func TestOtherUserSquatsSegment(t *testing.T) {
	otheruser.Require(t)
	for _, keyed := range []bool{true, false} {
		job, o := launch.NewJobName(), &Options{JoinTimeout: time.Minute}
		if keyed {
			o.JobKey = testKey
		}
		path := segPath("/dev/shm", segmentName(job, o.JobKey, o, 0))
		otheruser.Precreate(t, path)
		_, err := Join(job, 0, 2, o)
		wantForeign(t, err, path, "belongs to uid 61234")
		_, err = Join(job, 1, 2, o) // refused at once, not after JoinTimeout
		wantForeign(t, err, path, "belongs to uid 61234")
	}
}

// TestOtherUserLinksSegment: a symbolic link at the segment's name, to a
// file of the job's user, is followed neither by the creator nor by a
// joiner, and the target keeps its bytes.
func TestOtherUserLinksSegment(t *testing.T) {
	otheruser.Require(t)
	job, o := launch.NewJobName(), &Options{JobKey: testKey, JoinTimeout: time.Minute}
	path := segPath("/dev/shm", segmentName(job, o.JobKey, o, 0))
	target := path + ".target"
	if err := os.WriteFile(target, []byte("ours"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(target)
	otheruser.Symlink(t, target, path)
	_, err := Join(job, 0, 2, o)
	wantForeign(t, err, path, "symbolic link")
	_, err = Join(job, 1, 2, o)
	wantForeign(t, err, path, "symbolic link")
	if b, _ := os.ReadFile(target); string(b) != "ours" {
		t.Fatalf("the link's target holds %q, want %q", b, "ours")
	}
}

// TestOtherUserCannotTouchLiveSegment: while a job waits for its last
// rank, its name in /dev/shm is the 0700 directory where rank 0 serves
// the segment; the other user can neither read its socket, nor open it,
// nor truncate it. The job then completes with its data whole.
func TestOtherUserCannotTouchLiveSegment(t *testing.T) {
	otheruser.Require(t)
	job, o := launch.NewJobName(), &Options{JobKey: testKey}
	path := segPath("/dev/shm", segmentName(job, o.JobKey, o, 0))
	res := make(chan joined, 2)
	go func() { ep, err := Join(job, 0, 2, o); res <- joined{0, ep, err} }()
	for {
		if _, err := os.Stat(fdpass.SocketPath(path)); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	st, err := os.Lstat(path)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("live segment's name %s: %v, mode %v; want a directory of mode 0700", path, err, st.Mode())
	}
	otheruser.Refused(t, fdpass.SocketPath(path))
	go func() { ep, err := Join(job, 1, 2, o); res <- joined{1, ep, err} }()
	eps := collect(t, res, 2)
	msg := []byte("rank 0's secret for rank 1")
	if err := eps[0].Send(1, 7, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if st, err := eps[1].Recv(0, 7, buf); err != nil || string(buf[:st.Count]) != string(msg) {
		t.Fatalf("rank 1 received %q, %v; want %q", buf[:st.Count], err, msg)
	}
}

// TestCreatorOfAnotherUserIsGone: a segment whose creator pid now
// belongs to a process of another user (kill(pid, 0) says EPERM) is
// stale, not a live job's: a joiner does not take it, and says why.
func TestCreatorOfAnotherUserIsGone(t *testing.T) {
	otheruser.Require(t)
	job, o := launch.NewJobName(), &Options{JobKey: testKey, JoinTimeout: 50 * time.Millisecond}
	name := segmentName(job, o.JobKey, o, 0)
	s, err := createSegment("/dev/shm", name, o.layout(2), testKey)
	if err != nil {
		t.Fatal(err)
	}
	defer s.unmap()
	pid := otheruser.Sleeper(t)
	s.hdr.creatorPID = int32(pid)
	_, err = Join(job, 1, 2, o)
	want := "left by pid " + strconv.Itoa(pid) + ", which is gone"
	if !errors.Is(err, ErrJoinTimeout) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Join of a segment whose creator pid is another user's process: %v, want ErrJoinTimeout saying %q", err, want)
	}
}
